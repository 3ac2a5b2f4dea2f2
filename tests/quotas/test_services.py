"""allocation_set keeps every change as a version and refuses bad values with clear messages."""

from decimal import Decimal

import pytest

from common.errors import ValidationFailed
from quotas.models import Allocation, AllocationVersion
from quotas.services import allocation_set

pytestmark = pytest.mark.django_db


def test_first_set_creates_allocation_and_version_1(ns_a, gpu, admin):
    a = allocation_set(
        team_namespace=ns_a,
        resource=gpu,
        guarantee=6,
        cap=10,
        per_pod_max=8,
        priority_classes=["training", "experiment", "training"],
        acting_user=admin,
        reason="initial",
        source="test",
    )
    assert (a.guarantee, a.cap, a.per_pod_max, a.version) == (6, 10, 8, 1)
    assert a.priority_classes == ["experiment", "training"]
    v = AllocationVersion.objects.get(allocation=a)
    assert (v.version, v.guarantee, v.cap, v.changed_by, v.reason, v.source) == (
        1,
        6,
        10,
        admin,
        "initial",
        "test",
    )


def test_change_makes_a_new_version_and_keeps_history(alloc_a, ns_a, gpu, admin2):
    a = allocation_set(
        team_namespace=ns_a, resource=gpu, guarantee=4, cap=8, acting_user=admin2, reason="shrink"
    )
    assert a.version == 2
    assert list(a.versions.order_by("version").values_list("version", "guarantee", "cap")) == [
        (1, Decimal(6), Decimal(10)),
        (2, Decimal(4), Decimal(8)),
    ]
    assert Allocation.objects.get(pk=a.pk).updated_by == admin2


def test_unchanged_values_write_no_version(alloc_a, ns_a, gpu, admin):
    a = allocation_set(team_namespace=ns_a, resource=gpu, guarantee=6, cap=10, acting_user=admin)
    assert a.version == 1
    assert a.versions.count() == 1


@pytest.mark.parametrize(
    ("values", "field", "text"),
    [
        ({"guarantee": 6, "cap": 4}, "guarantee", "guarantee 6 exceeds cap 4"),
        (
            {"guarantee": 1, "cap": 4, "per_pod_max": 5},
            "per_pod_max",
            "per-pod max 5 exceeds cap 4 for team-a-training nvidia.com/gpu (per-pod max ≤ cap)",
        ),
        (
            {"guarantee": -1, "cap": 4},
            "guarantee",
            "guarantee -1 for team-a-training nvidia.com/gpu must not be negative",
        ),
        ({"guarantee": "ten", "cap": 4}, "guarantee", "guarantee must be a number"),
        ({"guarantee": 1, "cap": "NaN"}, "cap", "cap must be a finite number"),
        ({"guarantee": 1, "cap": 4, "per_pod_max": 0}, "per_pod_max", "must be positive"),
    ],
)
def test_bad_values_name_the_field_and_rule(ns_a, gpu, admin, values, field, text):
    with pytest.raises(ValidationFailed) as err:
        allocation_set(team_namespace=ns_a, resource=gpu, acting_user=admin, **values)
    assert err.value.field == field
    assert text in err.value.message
    assert not Allocation.objects.exists()
