"""seed_demo builds the seed's example and is idempotent."""

from decimal import Decimal

import pytest
from django.apps import apps
from django.contrib.auth import authenticate
from django.core.management import call_command
from django.test import RequestFactory

from quotas.audit.chain import audit_verify
from quotas.models import Allocation, AuditEvent, Cluster
from quotas.roles import is_auditor, is_platform_admin

pytestmark = pytest.mark.django_db

IGNORED_FIELDS = {"last_login", "updated_at", "created_at", "changed_at", "date_joined"}


def login_request():
    """The request a login comes with (the lockout backend counts attempts per address)."""
    return RequestFactory().post("/login/")


def snapshot() -> dict:
    """Every row of every model, timestamps left out."""
    state = {}
    for model in apps.get_models():
        rows = []
        for row in model.objects.all().order_by("pk").values():
            rows.append({k: v for k, v in row.items() if k not in IGNORED_FIELDS})
        state[model._meta.label] = rows
    return state


def test_seed_demo_twice_gives_the_same_state():
    call_command("seed_demo", verbosity=0)
    first = snapshot()
    call_command("seed_demo", verbosity=0)
    assert snapshot() == first


def test_seed_demo_has_the_seed_example():
    call_command("seed_demo", verbosity=0)
    demo = Cluster.objects.get(name="demo")
    assert demo.capacities.get(resource__name="nvidia.com/gpu").capacity == 16
    got = {
        a.team_namespace.name: (a.guarantee, a.cap)
        for a in Allocation.objects.filter(team_namespace__cluster=demo)
    }
    assert got == {
        "team-a-training": (Decimal(6), Decimal(10)),
        "team-b-inference": (Decimal(4), Decimal(6)),
        "team-c-dev": (Decimal(2), Decimal(4)),
    }
    mig = Cluster.objects.get(name="demo-mig")
    assert {c.resource.name for c in mig.capacities.all()} == {
        "nvidia.com/mig-1g.10gb",
        "nvidia.com/mig-3g.40gb",
    }


def test_seed_demo_users_have_their_roles():
    call_command("seed_demo", verbosity=0)
    for name in ("admin", "admin2"):
        assert is_platform_admin(authenticate(login_request(), username=name, password="demo"))
    viewer = authenticate(login_request(), username="viewer", password="demo")
    assert is_auditor(viewer) and not is_platform_admin(viewer)
    lead = authenticate(login_request(), username="lead-a", password="demo")
    assert not is_platform_admin(lead)
    assert lead.team_memberships.get().team.slug == "team-a"


def test_seed_demo_records_what_it_sets_up_in_the_audit_log():
    call_command("seed_demo", verbosity=0)
    actions = sorted(AuditEvent.objects.values_list("action", flat=True))
    assert {a: actions.count(a) for a in actions} == {
        "user.created": 6,
        "resource.created": 3,
        "priority_class.created": 3,
        "team.created": 3,
        "membership.created": 3,
        "cluster.created": 2,
        "capacity.changed": 3,
        "namespace.created": 6,
        "run_time_limit.set": 1,
        "allocation.changed": 6,
    }
    admin = AuditEvent.objects.get(action="user.created", target_repr="admin")
    assert admin.after["portal_roles"] == ["platform admin"]
    assert audit_verify().ok
