"""How long to wait before trying again what failed for a passing reason (a busy or unreachable
cluster, a mail server or webhook receiver down): exponential backoff, bounded, with jitter so
that what failed together does not retry together. Used by the cluster syncs, the re-drive of
failed syncs, and the e-mail and webhook deliveries.
"""

import random


def backoff_seconds(retries: int, *, base: float, cap: float, jitter: bool = True) -> float:
    """The wait before try ``retries + 2``: ``base`` doubled per retry so far, at most ``cap``;
    with ``jitter`` a random point in the upper half of that (never less than half)."""
    ceiling = min(cap, base * 2 ** min(retries, 32))  # the cap is reached long before 2**32
    return random.uniform(ceiling / 2, ceiling) if jitter else ceiling
