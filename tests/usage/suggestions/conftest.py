"""A month of rollups for the plan's namespaces, and its suggestions; and two months of hourly
samples (May and June 2025) for the backtest."""

import pytest

from tests.support.usage import backtest_months_create, june_suggestions_create, june_usage_create


@pytest.fixture
def june_usage(alloc_a, alloc_b, gpu):
    return june_usage_create(alloc_a, alloc_b, gpu)


@pytest.fixture
def june_suggestions(june_usage, cluster):
    return june_suggestions_create(cluster)


@pytest.fixture
def backtest_months(alloc_a, alloc_b, gpu):
    return backtest_months_create(alloc_a, alloc_b, gpu)
