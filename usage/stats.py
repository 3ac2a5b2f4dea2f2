"""Small pure statistics shared by the rollup's Python path, the what-if and the selectors."""

from collections.abc import Sequence
from datetime import datetime
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


def stood_for(
    times: Sequence[datetime],
    max_gap: Decimal,
    *,
    more_before: bool = False,
    more_after: bool = False,
) -> list[Decimal]:
    """The seconds each sample of one source stands for, ``times`` in order: until the next
    sample, the last one since the previous, at most ``max_gap`` seconds (a sample with no
    neighbour at all, none). ``more_after`` and ``more_before`` say the source has samples
    after or before those given, each further than ``max_gap`` from the samples that count:
    a neighbour the last sample counts at ``max_gap`` (the rollup's SQL does the same)."""
    seconds = []
    last = len(times) - 1
    for i, at in enumerate(times):
        if i < last:
            gap = Decimal(str((times[i + 1] - at).total_seconds()))
        elif more_after:
            gap = max_gap
        elif i > 0:
            gap = Decimal(str((at - times[i - 1]).total_seconds()))
        elif more_before:
            gap = max_gap
        else:
            gap = Decimal(0)
        seconds.append(min(gap, max_gap))
    return seconds
