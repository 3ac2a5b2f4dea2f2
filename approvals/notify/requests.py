"""What a request's notification says, and to whom."""

from django.conf import settings

from approvals.lines import lines_json
from approvals.models import QuotaRequest
from approvals.notify.dispatch import notify
from quotas.models import TeamMembership
from quotas.roles import is_platform_admin, platform_admins


def request_payload(request: QuotaRequest) -> dict:
    return {
        "id": request.pk,
        "team": request.team.slug,
        "status": request.status,
        "kind": request.kind,
        "requested_by": request.requested_by.username,
        "justification": request.justification,
        "starts_at": request.starts_at.isoformat() if request.starts_at else None,
        "ends_at": request.ends_at.isoformat() if request.ends_at else None,
        "decision_comment": request.decision_comment,
        "auto_approved": request.auto_approved,
        "lines": lines_json(request),
        "url": f"{settings.PORTAL_BASE_URL.rstrip('/')}/requests/{request.pk}/",
    }


def _recipients(request: QuotaRequest, event: str, author=None) -> list[str]:
    admins = platform_admins().values_list("email", flat=True)
    leads = TeamMembership.objects.filter(
        team=request.team, role=TeamMembership.Role.LEAD, user__is_active=True
    ).values_list("user__email", flat=True)
    if event == "request.submitted":
        emails = list(admins)
    elif event == "request.commented":
        # The other side of the discussion: an admin's comment goes to the team, a lead's
        # to the admins; never back to its author.
        team_side = [request.requested_by.email, *leads]
        emails = team_side if is_platform_admin(author) else list(admins)
        emails = [e for e in emails if e != author.email]
    elif event == "request.withdrawn":
        # The admins were asked (or gave capacity to a scheduled grant); the leads see it go.
        emails = [*admins, request.requested_by.email, *leads]
    else:
        emails = [request.requested_by.email, *leads]
    return sorted({e for e in emails if e})


def notify_request(request: QuotaRequest, event: str, *, author=None, **extra) -> None:
    """Queued for after the commit: a rolled-back decision notifies nobody. ``author``: who
    wrote the comment of a request.commented event."""
    notify(
        event=event,
        payload={**request_payload(request), **extra},
        recipients=_recipients(request, event, author),
    )
