"""Shared fixtures: named personas on the seed's example (16 A100, teams A-C), and the
Kubernetes API test server with a client for it (``kube_sandbox``, ``kube_client``)."""

from collections.abc import Iterator
from decimal import Decimal

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.cache import cache
from django.utils import translation
from kubernetes import client as k8s

from approvals.models import ApprovalPolicy
from kubesandbox import SandboxServer
from portal.celery import app
from quotas.models import Cluster, ClusterCapacity, Resource, Team, TeamMembership, TeamNamespace
from quotas.roles import AUDITORS, PLATFORM_ADMINS
from quotas.services import allocation_set
from tests.support.kube import api_client_for
from tests.support.people import make_user


@pytest.fixture(autouse=True)
def _fresh_throttle_counts():
    """Every test starts with no API throttle counts (they live in the cache)."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def admin(db) -> User:
    return make_user("admin", groups=(PLATFORM_ADMINS,), staff=True)


@pytest.fixture
def admin2(db) -> User:
    return make_user("admin2", groups=(PLATFORM_ADMINS,), staff=True)


@pytest.fixture
def auditor(db) -> User:
    return make_user("viewer", groups=(AUDITORS,), staff=True)


@pytest.fixture
def gpu(db) -> Resource:
    return Resource.objects.create(
        name="nvidia.com/gpu", display_name="A100 card", kind=Resource.Kind.GPU, unit="GPU"
    )


@pytest.fixture
def cluster(db, gpu) -> Cluster:
    cluster = Cluster.objects.create(name="demo", volcano_enabled=True)
    ClusterCapacity.objects.create(cluster=cluster, resource=gpu, capacity=Decimal(16))
    return cluster


@pytest.fixture
def team_a(db) -> Team:
    return Team.objects.create(slug="team-a", name="Team A")


@pytest.fixture
def team_b(db) -> Team:
    return Team.objects.create(slug="team-b", name="Team B")


@pytest.fixture
def lead_a(team_a) -> User:
    user = make_user("lead-a")
    TeamMembership.objects.create(team=team_a, user=user, role=TeamMembership.Role.LEAD)
    return user


@pytest.fixture
def member_a(team_a) -> User:
    user = make_user("member-a")
    TeamMembership.objects.create(team=team_a, user=user, role=TeamMembership.Role.MEMBER)
    return user


@pytest.fixture
def other_team_lead(team_b) -> User:
    user = make_user("lead-b")
    TeamMembership.objects.create(team=team_b, user=user, role=TeamMembership.Role.LEAD)
    return user


@pytest.fixture
def ns_a(cluster, team_a) -> TeamNamespace:
    return TeamNamespace.objects.create(
        team=team_a, cluster=cluster, name="team-a-training", workload_class="training"
    )


@pytest.fixture
def ns_b(cluster, team_b) -> TeamNamespace:
    return TeamNamespace.objects.create(
        team=team_b, cluster=cluster, name="team-b-inference", workload_class="inference"
    )


@pytest.fixture
def alloc_a(ns_a, gpu, admin):
    return allocation_set(
        team_namespace=ns_a, resource=gpu, guarantee=6, cap=10, acting_user=admin, reason="seed"
    )


@pytest.fixture
def alloc_b(ns_b, gpu, admin):
    return allocation_set(
        team_namespace=ns_b, resource=gpu, guarantee=4, cap=6, acting_user=admin, reason="seed"
    )


@pytest.fixture
def plan(db, cluster, gpu, team_a, team_b, admin):
    team_c = Team.objects.create(slug="team-c", name="Team C")
    namespaces = {}
    for team, name, g, c in (
        (team_a, "team-a-training", 6, 10),
        (team_b, "team-b-inference", 4, 6),
        (team_c, "team-c-dev", 2, 4),
    ):
        ns = TeamNamespace.objects.create(team=team, cluster=cluster, name=name)
        allocation_set(team_namespace=ns, resource=gpu, guarantee=g, cap=c, acting_user=admin)
        namespaces[team.slug] = ns
    return namespaces


@pytest.fixture
def lead_c(plan):
    user = make_user("lead-c")
    TeamMembership.objects.create(
        team=plan["team-c"].team, user=user, role=TeamMembership.Role.LEAD
    )
    return user


@pytest.fixture
def strict_policy(cluster):
    """No auto-approval: every request waits for an admin."""
    return ApprovalPolicy.objects.create(
        cluster=cluster, auto_approve_decreases=False, auto_approve_increase_max=0
    )


def _purge_broker() -> None:
    from portal.celery import app

    with app.connection_for_write() as conn:
        app.control.purge(connection=conn)


@pytest.fixture(autouse=True)
def no_leftover_tasks(request):
    """Tests that commit (transaction=True) queue real tasks through on_commit; clear the
    broker around them so a later test's real worker never runs another test's tasks."""
    marker = request.node.get_closest_marker("django_db")
    committing = marker is not None and marker.kwargs.get("transaction", False)
    if committing:
        _purge_broker()
    yield
    if committing:
        _purge_broker()


# --- the Kubernetes API test server ---------------------------------------------------


@pytest.fixture
def kube_sandbox(request) -> Iterator[SandboxServer]:
    """A running test server API server with only the default namespaces; stopped afterwards.

    Plain HTTP without a token (fast); a test asks for more through indirect parametrization,
    e.g. ``@pytest.mark.parametrize("kube_sandbox", [{"tls": True, "token": "t"}],
    indirect=True)`` (any SandboxServer keyword)."""
    options = getattr(request, "param", {})
    server = SandboxServer(host="127.0.0.1", port=0, **options).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def kube_client(kube_sandbox: SandboxServer) -> Iterator[k8s.ApiClient]:
    """``kubernetes.client.ApiClient`` pointed at ``kube_sandbox``; closed afterwards."""
    api_client = api_client_for(kube_sandbox)
    try:
        yield api_client
    finally:
        api_client.close()


@pytest.fixture
def eager():
    """Celery tasks run inline at .delay() (what on_commit queued is done at the commit)."""
    previous = app.conf.task_always_eager
    app.conf.task_always_eager = True
    try:
        yield
    finally:
        app.conf.task_always_eager = previous


@pytest.fixture(autouse=True)
def _default_language_after_each_test():
    """Each test starts in the default language: a Chinese page read through the test client
    leaves its language active in the thread (LocaleMiddleware sets it per request and a
    server's next request sets its own), and a service's message would follow it."""
    yield
    translation.activate(settings.LANGUAGE_CODE)
