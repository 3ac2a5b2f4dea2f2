"""The request list's rows read by one hand-written statement (approvals.selectors
requests_listed): the ORM's answers, on PostgreSQL and SQLite alike, and the waiting
requests' lines as the plan check reads them, with nothing left to load."""

from dataclasses import astuple
from datetime import timedelta
from decimal import Decimal as D

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals.grants import grant_extension_request
from approvals.lifecycle import request_create, request_submit
from approvals.lines import LineInput
from approvals.models import QuotaRequest
from approvals.selectors import requests_listed
from approvals.validation import requests_fit_problems
from quotas.models import ClusterCapacity, Resource, TeamNamespace
from quotas.services import allocation_set
from tests.support.requests import new_request, running_grant

pytestmark = pytest.mark.django_db
S = QuotaRequest.Status


@pytest.fixture
def world(plan, lead_c, gpu, admin, strict_policy):
    """A draft, a waiting request of two lines on two resources, a running temporary grant
    and a waiting extension of it."""
    team_c = plan["team-c"].team
    extra = TeamNamespace.objects.create(team=team_c, cluster=plan["team-c"].cluster, name="c-x")
    cpu = Resource.objects.create(name="cpu", display_name="CPU", kind="cpu", unit="cores")
    ClusterCapacity.objects.create(cluster=extra.cluster, resource=cpu, capacity=64)
    allocation_set(team_namespace=extra, resource=cpu, guarantee=2, cap=4, acting_user=admin)
    draft = new_request(lead_c, plan["team-c"], gpu, 1, 2)
    waiting = request_create(
        team=team_c,
        acting_user=lead_c,
        justification="two lines",
        lines=[
            LineInput(plan["team-c"].pk, gpu.pk, 3, 5, None),
            LineInput(extra.pk, cpu.pk, D("2.5"), D("6.25"), 2),
        ],
    )
    request_submit(request=waiting, acting_user=lead_c)
    grant = running_grant(lead_c, plan["team-c"], gpu, admin, guarantee=1, cap=3)
    grant.lines.update(decided_guarantee=1, decided_cap=2)  # approved with a lower cap
    extension = grant_extension_request(
        grant=grant,
        acting_user=lead_c,
        ends_at=grant.ends_at + timedelta(hours=5),
        justification="longer",
    )
    return {"draft": draft, "waiting": waiting, "grant": grant, "extension": extension}


def _as_the_orm_reads_it(qr: QuotaRequest) -> tuple:
    lines = [
        (
            line.team_namespace.name,
            line.team_namespace.cluster.name,
            line.resource.name,
            line.current_guarantee,
            line.current_cap,
            line.requested_guarantee,
            line.requested_cap,
            line.decided_guarantee,
            line.decided_cap,
        )
        for line in qr.lines.order_by("id")
    ]
    return (
        qr.pk,
        qr.team.slug,
        qr.status,
        qr.kind,
        qr.extends_id,
        qr.extends.ends_at if qr.extends_id else None,
        qr.ends_at,
        qr.submitted_at,
        qr.auto_approved,
        qr.approvals_needed,
        qr.approvals.count(),
        qr.requested_by_id,
        qr.requested_by.get_username(),
        lines,
    )


def _as_listed(row) -> tuple:
    lines = [astuple(line) for line in row.lines]
    return (
        row.pk,
        row.team,
        row.status,
        row.kind,
        row.extends_id,
        row.extends_ends_at,
        row.ends_at,
        row.submitted_at,
        row.auto_approved,
        row.approvals_needed,
        row.approvals_given,
        row.requested_by_id,
        row.requester,
        lines,
    )


def test_the_rows_are_the_orms_answers_in_the_order_asked(world):
    assert world["grant"].status == S.ACTIVE and world["extension"].status == S.SUBMITTED
    ids = [world[k].pk for k in ("extension", "draft", "grant", "waiting")]
    listed = requests_listed([*ids, 10**9])  # an id no request has is left out
    assert [row.pk for row in listed] == ids
    for row in listed:
        expected = _as_the_orm_reads_it(QuotaRequest.objects.get(pk=row.pk))
        assert _as_listed(row) == expected
        # Moments come aware, amounts as Decimals, whatever the database.
        for moment in (row.ends_at, row.submitted_at, row.extends_ends_at):
            assert moment is None or moment.tzinfo is not None
        assert all(isinstance(line.requested_cap, D) for line in row.lines)
    by_pk = {row.pk: row for row in listed}
    assert by_pk[world["grant"].pk].approvals_given == 1
    assert by_pk[world["extension"].pk].extends_ends_at == world["grant"].ends_at
    assert [line.requested_cap for line in by_pk[world["waiting"].pk].lines] == [5, D("6.25")]
    assert by_pk[world["grant"].pk].lines[0].decided_cap == 2
    assert requests_listed([]) == []


def test_only_waiting_rows_carry_the_plan_checks_lines(world):
    listed = {row.pk: row for row in requests_listed([world[k].pk for k in world])}
    assert [len(listed[world[k].pk].plan_lines) for k in world] == [0, 2, 0, 1]


def test_the_plan_check_on_the_listed_lines_answers_as_on_lines_it_reads(
    world, plan, gpu, admin, team_a
):
    # The plan moved under the waiting requests: team A takes the GPUs they asked for, and
    # team C has a ceiling below the waiting request's cap.
    allocation_set(
        team_namespace=plan["team-a"], resource=gpu, guarantee=12, cap=16, acting_user=admin
    )
    team_c = plan["team-c"].team
    team_c.gpu_ceiling = 4
    team_c.save(update_fields=["gpu_ceiling"])
    waiting = [world["waiting"], world["extension"]]
    with CaptureQueriesContext(connection) as reading:
        read = requests_fit_problems([QuotaRequest(pk=qr.pk) for qr in waiting])
    rows = {row.pk: row for row in requests_listed([qr.pk for qr in waiting])}
    with CaptureQueriesContext(connection) as given:
        listed = requests_fit_problems(
            [QuotaRequest(pk=qr.pk) for qr in waiting],
            lines_of={pk: list(row.plan_lines) for pk, row in rows.items()},
        )
    assert listed == read
    assert {f.rule for f in read[world["waiting"].pk]} >= {"guarantees_le_capacity"}
    assert any("ceiling" in f.rule for f in read[world["waiting"].pk])
    # The listed lines hold all the check reads: one query fewer, none per line.
    assert len(given.captured_queries) == len(reading.captured_queries) - 1
