"""The one backoff of every retry: doubled per retry, bounded, jittered in the upper half."""

from common.retry import backoff_seconds


def test_the_wait_doubles_per_retry_up_to_the_cap():
    waits = [backoff_seconds(n, base=2, cap=30, jitter=False) for n in range(6)]
    assert waits == [2, 4, 8, 16, 30, 30]


def test_a_huge_retry_count_stays_at_the_cap():
    assert backoff_seconds(10_000, base=1, cap=60, jitter=False) == 60


def test_jitter_spreads_the_wait_over_the_upper_half():
    for retries, ceiling in ((0, 10), (3, 80), (9, 600)):
        waits = [backoff_seconds(retries, base=10, cap=600) for _ in range(200)]
        assert all(ceiling / 2 <= w <= ceiling for w in waits)
        assert len(set(waits)) > 100  # not one fixed value: clients retry apart
