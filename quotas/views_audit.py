"""CSV export of the audit log for platform admins and auditors."""

import csv
import datetime

from django.contrib.auth.views import redirect_to_login
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    HttpResponseForbidden,
    StreamingHttpResponse,
)
from django.utils import timezone
from django.views.decorators.http import require_GET

from quotas.audit import audit_csv_rows, audit_events_filtered
from quotas.roles import sees_everything


class _Echo:
    """A file-like object whose write returns the line, so csv.writer can feed a stream."""

    def write(self, value: str) -> str:
        return value


@require_GET
def audit_export_csv(request: HttpRequest) -> HttpResponse:
    """GET /audit/export.csv[?action=...&since=YYYY-MM-DD]: the log in chain order."""
    user = request.user
    if not user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    if not sees_everything(user):
        return HttpResponseForbidden("only platform admins and auditors may export the audit log")
    since = None
    since_text = request.GET.get("since", "").strip()
    if since_text:
        try:
            day = datetime.date.fromisoformat(since_text)
        except ValueError:
            return HttpResponseBadRequest(
                f"since must be a date YYYY-MM-DD, got {since_text!r}", content_type="text/plain"
            )
        since = timezone.make_aware(datetime.datetime.combine(day, datetime.time.min))
    events = audit_events_filtered(action=request.GET.get("action", "").strip(), since=since)
    writer = csv.writer(_Echo())
    response = StreamingHttpResponse(
        (writer.writerow(row) for row in audit_csv_rows(events)), content_type="text/csv"
    )
    response["Content-Disposition"] = 'attachment; filename="audit-log.csv"'
    return response
