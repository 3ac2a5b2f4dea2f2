"""A month of rollups for the plan's namespaces, and its suggestions."""

import pytest

from tests.support.usage import june_suggestions_create, june_usage_create


@pytest.fixture
def june_usage(alloc_a, alloc_b, gpu):
    return june_usage_create(alloc_a, alloc_b, gpu)


@pytest.fixture
def june_suggestions(june_usage, cluster):
    return june_suggestions_create(cluster)
