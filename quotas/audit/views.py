"""The audit log for platform admins and auditors: the page (/audit/, newest first, 25 a page)
and its CSV export (/audit/export.csv, in chain order). Both read the same filters through the
same FilterSet as GET /api/v1/audit-events/ (actor, team, action, since, until, ...)."""

import csv

from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    StreamingHttpResponse,
)
from django.shortcuts import render
from django.template.defaultfilters import truncatechars
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET

from common.sections import jinja_section
from quotas.audit.chain import audit_csv_rows, audit_events_filtered
from quotas.audit.labels import ACTION_LABELS, action_label, audit_change_summary
from quotas.audit.targets import audit_targets
from quotas.filtersets import AuditEventFilterSet
from quotas.models import AuditEvent, Team
from quotas.roles import sees_everything

EVENTS_PER_PAGE = 25
COMMENT_CHARS = 120  # an event's comment is cut to this many characters on the page
# The filters the page offers (the FilterSet takes target_type and target_id too).
PAGE_FILTERS = ("actor", "team", "action", "since", "until")


class _Echo:
    """A file-like object whose write returns the line, so csv.writer can feed a stream."""

    def write(self, value: str) -> str:
        return value


def may_read_audit_log(user) -> bool:
    return sees_everything(user)


def audit_filters(request: HttpRequest) -> AuditEventFilterSet:
    """The log in chain order, narrowed by the request's filters (check ``filter_errors``)."""
    return AuditEventFilterSet(request.GET, queryset=audit_events_filtered(), request=request)


@require_GET
def audit_export_csv(request: HttpRequest) -> HttpResponse:
    """GET /audit/export.csv[?actor=&team=&action=&since=&until=]: the log in chain order."""
    user = request.user
    if not user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    if not may_read_audit_log(user):
        raise PermissionDenied(_("Only platform admins and auditors may export the audit log."))
    filters = audit_filters(request)
    errors = filters.filter_errors()
    if errors:
        return HttpResponseBadRequest("\n".join(errors), content_type="text/plain; charset=utf-8")
    writer = csv.writer(_Echo())
    response = StreamingHttpResponse(
        (writer.writerow(row) for row in audit_csv_rows(filters.qs)),
        content_type="text/csv; charset=utf-8",
    )
    response["Content-Disposition"] = 'attachment; filename="audit-log.csv"'
    return response


@require_GET
@login_required
def audit_log(request: HttpRequest) -> HttpResponse:
    """GET /audit/: the log newest first, filtered as the export, with the export's link."""
    if not may_read_audit_log(request.user):
        raise PermissionDenied(_("Only platform admins and auditors may read the audit log."))
    context, status = _audit_log_context(request)
    section = jinja_section(request, "quotas/_audit_log.html", context)
    return render(request, "quotas/audit_log.html", {"section": section}, status=status)


def _event_row(event: AuditEvent, target: dict[str, str]) -> dict:
    """An event's cells as the page writes them."""
    when = timezone.localtime(event.created_at)
    return {
        "seq": event.seq,
        "iso": when.isoformat(),
        "when": when.strftime("%Y-%m-%d %H:%M:%S"),
        "actor": event.actor_username or _("system"),
        "action": event.action,
        "action_label": action_label(event.action),
        "target": target,
        "changes": audit_change_summary(event.before, event.after, event.target_type),
        "comment": truncatechars(event.comment, COMMENT_CHARS) if event.comment else "",
    }


def _audit_log_context(request: HttpRequest) -> tuple[dict, int]:
    filters = audit_filters(request)
    errors = filters.filter_errors()
    selected = {name: request.GET.get(name, "").strip() for name in PAGE_FILTERS}
    given = {name: value for name, value in selected.items() if value}
    rows, page = [], None
    if not errors:
        page = Paginator(filters.qs.order_by("-seq"), EVENTS_PER_PAGE).get_page(
            request.GET.get("page")
        )
        events = list(page)
        targets = audit_targets(events)
        rows = [_event_row(event, targets[event.seq]) for event in events]
    actions = sorted(ACTION_LABELS)
    if selected["action"] and selected["action"] not in ACTION_LABELS:
        actions.append(selected["action"])  # a prefix (request.) or an action no label names
    context = {
        "rows": rows,
        "page": page,
        "errors": errors,
        "error_fields": set(filters.form.errors) if errors else set(),
        "selected": selected,
        "actions": [(code, action_label(code)) for code in actions],
        "teams": Team.objects.order_by("slug").values_list("slug", flat=True),
        "query": urlencode(given),
        "export_url": reverse("audit-export") + (f"?{urlencode(given)}" if given else ""),
    }
    return context, 400 if errors else 200
