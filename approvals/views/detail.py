"""The page of one quota request and its actions: its lines side by side (current, requested,
decided), the justification, approvals, syncs and a readable timeline, with only the actions
this viewer may take (one POST each), and the dry-run preview of what approving would change
in the clusters. The list is in views_list, the form in views_form.

Each view fetches through the selectors (so the UI and the API show the same rows), calls one
service and renders. Service refusals (ApplicationError) are shown next to the field they
name, with the user's input kept.
"""

import re

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.dateparse import parse_datetime
from django.utils.html import format_html
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext
from django.views.decorators.http import require_POST

from approvals.access import allowed_actions, may, may_preview_in_clusters
from approvals.discussion import request_comment_add, request_comments
from approvals.forms import ApproveForm, CommentForm, DiscussionForm, ExtendForm
from approvals.grants import grant_extension_request, request_revoke
from approvals.lifecycle import (
    request_approve,
    request_changes,
    request_delete,
    request_rebase,
    request_reject,
    request_submit,
    request_withdraw,
)
from approvals.models import QuotaRequest, RequestLine
from approvals.preview import request_preview
from approvals.selectors import (
    request_approvals,
    request_base_changes,
    request_is_settled,
    request_lines,
    request_syncs,
    request_timeline,
    requests_visible_to,
)
from approvals.validation import requests_fit_problems
from approvals.whatif import lines_what_if
from common.amounts import format_amount
from common.errors import ApplicationError
from quotas.kube.client import KubeError

S = QuotaRequest.Status
LINE_FIELD = re.compile(r"^(?:lines|decisions)\[(\d+)\](?:\.(\w+))?")
# Statuses after an approval: lines without decided values were approved as requested.
APPROVED_ONES = (S.APPROVED, S.APPLYING, S.APPLIED, S.FAILED, S.ACTIVE, S.EXPIRED, S.REVOKED)
VALUE_LABELS = {
    "guarantee": gettext_lazy("Guarantee"),
    "cap": gettext_lazy("Cap"),
    "per_pod_max": gettext_lazy("Per-pod max"),
    "priority_classes": gettext_lazy("Priority classes"),
}


def _visible_request(user, pk: int) -> QuotaRequest:
    request = (
        requests_visible_to(user)
        .select_related("team", "requested_by", "extends")
        .filter(pk=pk)
        .first()
    )
    if request is None:
        raise Http404(_("No such request among those you may see."))
    return request


# --- what the page shows ----------------------------------------------------------------------


def approval_text(qr: QuotaRequest, given: int) -> str:
    """Where the request stands with its approvals, as a sentence."""
    if qr.auto_approved:
        return _("Auto-approved by the cluster's policy.")
    if qr.status in (S.DRAFT, S.CHANGES_REQUESTED):
        return _("Not submitted: the cluster's policy says who must approve when it is.")
    needed = qr.approvals_needed
    return ngettext(
        "%(given)s of %(needed)s approval given.",
        "%(given)s of %(needed)s approvals given.",
        needed,
    ) % {"given": given, "needed": needed}


def _classes(names) -> str:
    return ", ".join(names) if names else _("any class")


def _shown(value) -> str:
    text = format_amount(value)
    return "\N{EN DASH}" if text is None else text


def _values(qr: QuotaRequest, line: RequestLine, approve_form: ApproveForm | None) -> list[dict]:
    """The line's rows: each value current, requested and decided (or the admin's fields)."""
    decided = line.decided_cap is not None
    as_requested = qr.status in APPROVED_ONES
    rows = []
    for key in ("guarantee", "cap", "per_pod_max", "priority_classes"):
        if key == "priority_classes":
            current = _classes(line.current_priority_classes)
            requested = _classes(line.requested_priority_classes)
            decided_value = _classes(line.final_priority_classes) if decided else None
        else:
            current = _shown(getattr(line, f"current_{key}"))
            requested = _shown(getattr(line, f"requested_{key}"))
            decided_value = _shown(getattr(line, f"decided_{key}")) if decided else None
        row = {
            "key": key,
            "label": VALUE_LABELS[key],
            "current": current,
            "requested": requested,
            "changed": requested != current,
            "decided": decided_value,
            "as_requested": decided_value is None and as_requested,
            "decided_changed": decided_value is not None and decided_value != requested,
        }
        if approve_form is not None:
            row["fields"] = _decide_fields(approve_form, line, key)
        rows.append(row)
    return rows


def _decide_fields(form: ApproveForm, line: RequestLine, key: str) -> list:
    if key == "priority_classes":
        return form.class_fields(line)
    fields = [form[f"decided-{line.pk}-{key}"]]
    if key == "per_pod_max":
        fields.append(form.removal_field(line))
    return fields


def _usage_rows(snapshot: dict) -> list[dict]:
    rows = []
    for entry in (snapshot.get("usage") or {}).get("namespaces", []):
        if entry.get("error"):
            rows.append({**entry, "resources": []})
            continue
        resources = [
            {"name": name, **values} for name, values in sorted((entry.get("usage") or {}).items())
        ]
        rows.append({**entry, "resources": resources})
    return rows


def _render_detail(
    request,
    qr: QuotaRequest,
    *,
    approve_form=None,
    reject_form=None,
    changes_form=None,
    revoke_form=None,
    comment_form=None,
    extend_form=None,
    errors=(),
    line_errors=None,
    status=200,
):
    user = request.user
    lines = request_lines(qr)
    approvals = request_approvals(qr)
    # The rulebook the services enforce (approvals.access); an admin who approved already
    # may still reject or ask for changes, and waits for a second one to approve.
    allowed = allowed_actions(user, qr)
    may_decide = "approve" in allowed
    plan_problems = []
    if qr.status == S.SUBMITTED:
        plan_problems = [f.message for f in requests_fit_problems([qr])[qr.pk]]
    stale = request_base_changes(lines) if "rebase" in allowed else []
    approve_form = approve_form or ApproveForm(lines=lines)
    approve_form.lines = lines
    for line in lines:
        line.errors = (line_errors or {}).get(line.pk, [])
        # An extension changes no amounts: nothing to decide on its lines.
        deciding = may_decide and not qr.is_extension
        line.values = _values(qr, line, approve_form if deciding else None)
    snapshot = qr.usage_snapshot or {}
    syncs = request_syncs(qr)
    return render(
        request,
        "approvals/request_detail.html",
        {
            "qr": qr,
            "lines": lines,
            "approvals": approvals,
            "approval_text": approval_text(qr, len(approvals)),
            "timeline": request_timeline(qr),
            "syncs": syncs,
            "live": live_root(qr, syncs=syncs, allowed=allowed),
            "usage": _usage_rows(snapshot),
            "what_if": lines_what_if(lines, extension=qr.is_extension),
            "snapshot_taken_at": parse_datetime(snapshot.get("taken_at") or ""),
            "errors": list(errors),
            "may_edit": "edit" in allowed,
            "may_submit": "submit" in allowed,
            "may_withdraw": "withdraw" in allowed,
            "may_delete": "delete" in allowed,
            "may_rebase": bool(stale),
            "may_revoke": "revoke" in allowed,
            "stale": stale,
            "may_decide": may_decide,
            "approved_by_me": "reject" in allowed and not may_decide,
            "plan_problems": plan_problems,
            "may_preview": may_preview_in_clusters(user),
            "approve_form": approve_form,
            "reject_form": reject_form or CommentForm(prefix="reject"),
            "changes_form": changes_form or CommentForm(prefix="changes"),
            "revoke_form": revoke_form or CommentForm(prefix="revoke"),
            "comments": list(request_comments(qr)),
            "may_comment": "comment" in allowed,
            "comment_form": comment_form or DiscussionForm(),
            "comment_open": comment_form is not None,
            "may_extend": "extend" in allowed,
            "extend_form": extend_form or ExtendForm(),
            "extend_open": extend_form is not None,
            "grant": qr.extends if qr.is_extension else None,
            "extensions": list(qr.extensions.order_by("-created_at")) if qr.is_temporary else [],
        },
        status=status,
    )


def live_root(qr: QuotaRequest, *, syncs, allowed) -> dict:
    """What the page's live root says about the request as rendered: whether anything more
    will happen by itself (then the script stops asking), and the actions this user had
    (when they change, the page's buttons are out of date)."""
    return {
        "url": reverse("requests-live", args=[qr.pk]),
        "settled": request_is_settled(qr, syncs),
        "actions": " ".join(sorted(allowed)),
    }


@login_required
def request_detail(request: HttpRequest, pk: int) -> HttpResponse:
    return _render_detail(request, _visible_request(request.user, pk))


# --- actions ----------------------------------------------------------------------------------


def _line_errors_from_findings(exc: ApplicationError, lines: list[RequestLine]) -> dict:
    by_name = {(li.team_namespace.name, li.resource.name): li.pk for li in lines}
    found: dict[int, list[str]] = {}
    for finding in exc.extra.get("errors") or []:
        line_id = by_name.get((finding.get("namespace"), finding.get("resource")))
        if line_id is not None:
            found.setdefault(line_id, []).append(finding["message"])
    return found


def _approve(request, qr: QuotaRequest, lines: list[RequestLine]) -> HttpResponse | None:
    """The approve button: decided values from the form; a refused value at its field."""
    approve_form = ApproveForm(request.POST, lines=lines)
    if not approve_form.is_valid():
        return _render_detail(request, qr, approve_form=approve_form, status=400)
    decisions = approve_form.decisions()
    try:
        request_approve(
            request=qr,
            acting_user=request.user,
            comment=approve_form.cleaned_data["comment"],
            decisions=decisions,
        )
    except ApplicationError as exc:
        match = LINE_FIELD.match(exc.field or "")
        if not (match and exc.field.startswith("decisions") and match.group(2)):
            return _render_detail(
                request,
                qr,
                approve_form=approve_form,
                errors=[exc.message],
                line_errors=_line_errors_from_findings(exc, lines),
                status=exc.status_code,
            )
        line_id = decisions[int(match.group(1))].line_id
        approve_form.add_error(f"decided-{line_id}-{match.group(2)}", exc.message)
        return _render_detail(request, qr, approve_form=approve_form, status=exc.status_code)
    return None


COMMENTED = {"reject": request_reject, "changes": request_changes, "revoke": request_revoke}


def _commented(request, qr: QuotaRequest, action: str) -> HttpResponse | None:
    """Reject, ask for changes or revoke: a comment the service requires (and says so)."""
    form = CommentForm(request.POST, prefix=action)
    forms = {f"{action}_form": form}
    if not form.is_valid():  # too long: the form says so
        return _render_detail(request, qr, **forms, status=400)
    try:
        COMMENTED[action](
            request=qr, acting_user=request.user, comment=form.cleaned_data["comment"]
        )
    except ApplicationError as exc:
        if exc.field == "comment":
            form.add_error("comment", exc.message)
            return _render_detail(request, qr, **forms, status=exc.status_code)
        return _render_detail(request, qr, **forms, errors=[exc.message], status=exc.status_code)
    return None


PLAIN = {
    "submit": request_submit,
    "withdraw": request_withdraw,
    "rebase": request_rebase,
}


@login_required
@require_POST
def request_action(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    """One POST per action; the service re-checks who may do it."""
    qr = _visible_request(request.user, pk)
    user = request.user
    if action == "approve":
        refused = _approve(request, qr, request_lines(qr))
    elif action in COMMENTED:
        refused = _commented(request, qr, action)
    elif action in PLAIN or action == "delete":
        try:
            if action == "delete":
                request_delete(request=qr, acting_user=user)
                messages.success(request, _("Draft #%(id)s deleted.") % {"id": pk})
                return redirect("requests-list")
            PLAIN[action](request=qr, acting_user=user)
            refused = None
        except ApplicationError as exc:
            refused = _render_detail(
                request,
                qr,
                errors=[exc.message],
                line_errors=_line_errors_from_findings(exc, request_lines(qr)),
                status=exc.status_code,
            )
    else:
        raise Http404(_("No such action on a request."))
    if refused is not None:
        return refused
    qr.refresh_from_db()
    messages.success(
        request,
        _("Request #%(id)s is %(status)s.") % {"id": qr.pk, "status": qr.get_status_display()},
    )
    return redirect("requests-detail", pk=qr.pk)


# --- the discussion, and extending a grant ---------------------------------------------------


def _field_text(exc: ApplicationError, field: str) -> str:
    """The refusal shown at its field: without the field's name the API puts first."""
    return exc.message.removeprefix(f"{field}: ").removeprefix(f"{field}\N{FULLWIDTH COLON}")


@login_required
@require_POST
def request_comment(request: HttpRequest, pk: int) -> HttpResponse:
    """Post a comment; a refused text is shown at the field with what was typed kept."""
    qr = _visible_request(request.user, pk)
    form = DiscussionForm(request.POST)
    if not form.is_valid():  # NUL characters: the form says so
        return _render_detail(request, qr, comment_form=form, status=400)
    try:
        request_comment_add(request=qr, acting_user=request.user, text=form.cleaned_data["text"])
    except ApplicationError as exc:
        if exc.field == "text":
            form.add_error("text", _field_text(exc, "text"))
            return _render_detail(request, qr, comment_form=form, status=exc.status_code)
        return _render_detail(
            request, qr, comment_form=form, errors=[exc.message], status=exc.status_code
        )
    messages.success(request, _("Your comment is added."))
    return redirect(reverse("requests-detail", args=[qr.pk]) + "#discussion")


@login_required
@require_POST
def request_extend(request: HttpRequest, pk: int) -> HttpResponse:
    """Ask for a later end of a running temporary grant: a new request the admins decide."""
    grant = _visible_request(request.user, pk)
    form = ExtendForm(request.POST)
    if not form.is_valid():
        return _render_detail(request, grant, extend_form=form, status=400)
    try:
        extension = grant_extension_request(
            grant=grant,
            acting_user=request.user,
            ends_at=form.cleaned_data["ends_at"],
            justification=form.cleaned_data["justification"],
        )
    except ApplicationError as exc:
        if exc.field in ("ends_at", "justification"):
            form.add_error(exc.field, _field_text(exc, exc.field))
            return _render_detail(request, grant, extend_form=form, status=exc.status_code)
        return _render_detail(
            request, grant, extend_form=form, errors=[exc.message], status=exc.status_code
        )
    messages.success(
        request,
        _("Extension #%(id)s of grant #%(grant)s is %(status)s.")
        % {"id": extension.pk, "grant": grant.pk, "status": extension.get_status_display()},
    )
    return redirect("requests-detail", pk=extension.pk)


# --- preview in the clusters --------------------------------------------------------------


@login_required
def request_preview_page(request: HttpRequest, pk: int) -> HttpResponse:
    """What approving would change in each cluster, from server-side dry runs."""
    qr = _visible_request(request.user, pk)
    access = may(request.user, qr, "preview")
    if not access:
        return render(request, "approvals/refused.html", {"message": access.message}, status=403)
    error = ""
    clusters = {}
    try:
        clusters = request_preview(qr)
    except KubeError as exc:
        # The cluster's own words as machine text, after the reader's language's.
        error = format_html("{} <code>{}</code>", _("cluster unreachable:"), exc)
    return render(
        request,
        "approvals/request_preview.html",
        {"qr": qr, "clusters": clusters, "cluster_error": error},
    )
