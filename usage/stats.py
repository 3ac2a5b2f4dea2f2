"""Small pure statistics shared by the rollup's Python path and the selectors."""

from collections.abc import Sequence
from decimal import Decimal


def percentile(values: Sequence[Decimal], fraction: Decimal) -> Decimal:
    """The continuous percentile with linear interpolation between the closest ranks, exactly as
    PostgreSQL's ``percentile_cont(fraction) WITHIN GROUP (ORDER BY value)`` computes it."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(Decimal(v) for v in values)
    position = Decimal(fraction) * (len(ordered) - 1)
    lower = int(position)
    upper = min(lower + 1, len(ordered) - 1)
    weight = position - lower
    return ordered[lower] + (ordered[upper] - ordered[lower]) * weight
