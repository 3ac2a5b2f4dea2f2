"""Telling a team that an allocation nears its cap: on the dashboard at every visit, and by
e-mail to its leads and a ``team.near_cap`` webhook once per crossing.

An allocation is near its cap when its newest reading reaches ``CAP_NOTICE_SHARE`` of the cap
(pods asking for more stay pending at the cap). After each reading of a cluster an open
notice is kept per allocation (:class:`usage.models.CapNotice`): the team hears once when the
line is crossed, and again only after the reading fell below the share minus
``CLEAR_MARGIN`` (so a reading that wavers around the line does not notify at every reading).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import OuterRef, Subquery
from django.utils import timezone

from approvals.notify import notify
from common.amounts import format_amount
from quotas.models import Allocation, TeamMembership
from usage.models import CapNotice, UsageSample

CLEAR_MARGIN = Decimal("0.1")
# Readings older than this (three collection intervals, at least 15 minutes) say nothing of now.
MIN_FRESHNESS = timedelta(minutes=15)


def _share() -> Decimal:
    return Decimal(str(settings.CAP_NOTICE_SHARE))


def near_cap(used: Decimal | None, cap: Decimal) -> bool:
    """Whether a reading of ``used`` is near ``cap`` (never for a zero cap or no reading)."""
    share = _share()
    return share > 0 and used is not None and cap > 0 and used >= cap * share


def _below_again(used: Decimal, cap: Decimal) -> bool:
    return cap <= 0 or used < cap * (_share() - CLEAR_MARGIN)


def _freshness() -> timedelta:
    return max(MIN_FRESHNESS, timedelta(seconds=3 * settings.USAGE_COLLECT_SECONDS))


@dataclass(frozen=True)
class CapNoticeResult:
    opened: int = 0
    cleared: int = 0


def cap_notice_payload(row: dict, used: Decimal) -> dict:
    slug = row["team_namespace__team__slug"]
    return {
        "team": slug,
        "cluster": row["team_namespace__cluster__name"],
        "namespace": row["team_namespace__name"],
        "resource": row["resource__name"],
        "used": format_amount(used),
        "cap": format_amount(row["cap"]),
        "share": str(settings.CAP_NOTICE_SHARE),
        "url": f"{settings.PORTAL_BASE_URL.rstrip('/')}/?team={slug}",
    }


def _leads(team_id: int) -> list[str]:
    emails = TeamMembership.objects.filter(
        team_id=team_id, role=TeamMembership.Role.LEAD, user__is_active=True
    ).values_list("user__email", flat=True)
    return sorted({e for e in emails if e})


def cap_notices_check(*, cluster_id: int, now: datetime | None = None) -> CapNoticeResult:
    """Open a notice (and tell the team) for each allocation of the cluster whose fresh newest
    reading is near its cap and has none open; clear the open ones whose reading fell below
    again. Safe to run twice at once: one notice, one notification."""
    if _share() <= 0:
        return CapNoticeResult()
    now = now or timezone.now()
    newest = UsageSample.objects.filter(
        team_namespace=OuterRef("team_namespace"), resource=OuterRef("resource")
    ).order_by("-timestamp", "-source")
    rows = (
        Allocation.objects.filter(team_namespace__cluster_id=cluster_id)
        .annotate(
            used=Subquery(newest.values("allocated")[:1]),
            used_at=Subquery(newest.values("timestamp")[:1]),
        )
        .values(
            "id",
            "cap",
            "used",
            "used_at",
            "team_namespace__team_id",
            "team_namespace__team__slug",
            "team_namespace__cluster__name",
            "team_namespace__name",
            "resource__name",
        )
    )
    open_ids = set(
        CapNotice.objects.filter(
            allocation__team_namespace__cluster_id=cluster_id, cleared_at__isnull=True
        ).values_list("allocation_id", flat=True)
    )
    fresh_since = now - _freshness()
    opened = cleared = 0
    for row in rows:
        used = row["used"]
        if used is None or row["used_at"] < fresh_since:
            continue  # no word of now: an open notice stays open
        if row["id"] in open_ids:
            if _below_again(used, row["cap"]):
                cleared += CapNotice.objects.filter(
                    allocation_id=row["id"], cleared_at__isnull=True
                ).update(cleared_at=now)
            continue
        if not near_cap(used, row["cap"]):
            continue
        try:
            with transaction.atomic():
                CapNotice.objects.create(
                    allocation_id=row["id"], opened_at=now, used=used, cap=row["cap"]
                )
                # Queued for after the commit: the worker that lost the race tells nobody.
                notify(
                    event="team.near_cap",
                    payload=cap_notice_payload(row, used),
                    recipients=_leads(row["team_namespace__team_id"]),
                )
        except IntegrityError:
            continue  # another reading of the same cluster opened it first
        opened += 1
    return CapNoticeResult(opened=opened, cleared=cleared)
