"""Pages of quota requests: list, new, edit, detail with its actions, and the cluster preview.

Each view parses a form, fetches through the selectors (so the UI and the API show the same
rows), calls one service and renders. Service refusals (ApplicationError) are shown next to the
field they name, with the user's input kept.
"""

import re

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count, Prefetch
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from approvals.filtersets import RequestFilterSet
from approvals.forms import (
    ApproveForm,
    CommentForm,
    RequestForm,
    filled_line_forms,
    line_formset,
    line_initial,
)
from approvals.grants import request_revoke
from approvals.lifecycle import (
    request_approve,
    request_changes,
    request_create,
    request_delete,
    request_rebase,
    request_reject,
    request_revise,
    request_submit,
    request_withdraw,
)
from approvals.models import QuotaRequest, RequestLine
from approvals.selectors import (
    EDITABLE,
    has_approved,
    may_preview_in_clusters,
    request_actions_for,
    request_base_changes,
    request_may,
    request_preview,
    requests_visible_to,
)
from approvals.validation import requests_fit_problems
from common.amounts import format_amount
from common.errors import ApplicationError
from quotas.kube.client import KubeError
from quotas.models import (
    Allocation,
    AuditEvent,
    ClusterCapacity,
    Resource,
    Team,
    TeamNamespace,
)
from quotas.selectors import teams_requestable_by

S = QuotaRequest.Status
LINE_FIELD = re.compile(r"^(?:lines|decisions)\[(\d+)\](?:\.(\w+))?")


def _visible_request(user, pk: int) -> QuotaRequest:
    request = requests_visible_to(user).select_related("team", "requested_by").filter(pk=pk).first()
    if request is None:
        raise Http404("no such request")
    return request


def _lines(request: QuotaRequest) -> list[RequestLine]:
    return list(request.lines.select_related("team_namespace__cluster", "resource").order_by("id"))


# --- list -----------------------------------------------------------------------------------


@login_required
def request_list(request: HttpRequest) -> HttpResponse:
    user = request.user
    rows = (
        requests_visible_to(user)
        .select_related("team", "requested_by")
        .prefetch_related(
            Prefetch(
                "lines",
                queryset=RequestLine.objects.select_related("team_namespace", "resource"),
            )
        )
        .annotate(approvals_given=Count("approvals", distinct=True))
        .order_by("-created_at", "-id")
    )
    # The same FilterSet as GET /api/v1/requests/: a bad value is a form error and a 400.
    filters = RequestFilterSet(request.GET or None, queryset=rows, request=request)
    errors = filters.filter_errors()
    page = Paginator(filters.qs, 50).get_page(request.GET.get("page"))
    # The same answer the API and the approval give: waiting requests that no longer fit.
    problems = requests_fit_problems([qr for qr in page if qr.status == S.SUBMITTED])
    for qr in page:
        qr.plan_problems = [f.message for f in problems.get(qr.pk, [])]
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "approvals/request_list.html",
        {
            "filters": filters.form,
            "filter_errors": errors,
            "page": page,
            "query": query.urlencode(),
            "may_request": teams_requestable_by(user).exists(),
        },
        status=400 if errors else 200,
    )


# --- new and edit ---------------------------------------------------------------------------


def _current_values(teams) -> dict:
    """For the form's prefill: per namespace, its cluster's resources and current values."""
    namespaces = TeamNamespace.objects.filter(team__in=teams)
    resources_by_cluster: dict[int, list[int]] = {}
    for cluster_id, resource_id in ClusterCapacity.objects.filter(
        cluster_id__in=namespaces.values("cluster_id")
    ).values_list("cluster_id", "resource_id"):
        resources_by_cluster.setdefault(cluster_id, []).append(resource_id)
    data = {
        str(ns.pk): {"team": ns.team_id, "resources": resources_by_cluster.get(ns.cluster_id, [])}
        for ns in namespaces
    }
    current: dict[str, dict] = {}
    for a in Allocation.objects.filter(team_namespace__in=namespaces):
        current.setdefault(str(a.team_namespace_id), {})[str(a.resource_id)] = {
            "guarantee": format_amount(a.guarantee),
            "cap": format_amount(a.cap),
            "per_pod_max": format_amount(a.per_pod_max),
            "priority_classes": list(a.priority_classes),
        }
    return {"namespaces": data, "current": current}


def _place_error(exc: ApplicationError, *, form, formset, form_indices: list[int]) -> list[str]:
    """Put the service's error next to the field it names; returns what fits nowhere."""
    loose = []
    field = exc.field or ""
    match = LINE_FIELD.match(field)
    if match and int(match.group(1)) < len(form_indices):
        target = formset.forms[form_indices[int(match.group(1))]]
        name = match.group(2)
        target.add_error(name if name in target.fields else None, exc.message)
    elif field in form.fields:
        form.add_error(field, exc.message)
    else:
        loose.append(exc.message)
    return loose


def _place_findings(
    exc: ApplicationError, line_names: list[tuple[str, str]], *, formset, form_indices
):
    """Plan-rule errors of a failed submit, next to the line (namespace, resource) they name."""
    findings = exc.extra.get("errors") or []
    if not findings:
        return [exc.message]
    index_of = {names: i for i, names in enumerate(line_names)}
    loose = []
    for finding in findings:
        i = index_of.get((finding.get("namespace"), finding.get("resource")))
        if i is None or i >= len(form_indices):
            loose.append(finding["message"])
            continue
        target = formset.forms[form_indices[i]]
        name = finding.get("field")
        target.add_error(name if name in target.fields else None, finding["message"])
    return loose


def _render_form(request, *, form, formset, teams, draft=None, errors=(), status=200):
    return render(
        request,
        "approvals/request_form.html",
        {
            "form": form,
            "formset": formset,
            "draft": draft,
            "errors": list(errors),
            "action_url": reverse("requests-edit", args=[draft.pk])
            if draft
            else reverse("requests-new"),
            "current_values": _current_values(teams),
        },
        status=status,
    )


def _line_names(inputs) -> list[tuple[str, str]]:
    """(namespace, resource) names of the form's lines, to place plan findings on them."""
    namespaces = dict(
        TeamNamespace.objects.filter(pk__in=[i.team_namespace_id for i in inputs]).values_list(
            "pk", "name"
        )
    )
    resources = dict(
        Resource.objects.filter(pk__in=[i.resource_id for i in inputs]).values_list("pk", "name")
    )
    return [(namespaces.get(i.team_namespace_id), resources.get(i.resource_id)) for i in inputs]


def _refused(request, exc, *, form, formset, teams, form_indices, inputs, draft=None):
    """A refused save or submit: nothing changed; the form again, errors on their fields."""
    if exc.extra.get("errors"):
        loose = _place_findings(
            exc, _line_names(inputs), formset=formset, form_indices=form_indices
        )
    else:
        loose = _place_error(exc, form=form, formset=formset, form_indices=form_indices)
    return _render_form(
        request,
        form=form,
        formset=formset,
        teams=teams,
        draft=draft,
        errors=loose,
        status=exc.status_code,
    )


def _saved(request, saved: QuotaRequest) -> HttpResponse:
    saved.refresh_from_db()
    if saved.status == S.DRAFT:
        messages.success(request, f"Draft #{saved.pk} saved.")
    else:
        messages.success(request, f"Request #{saved.pk} is {saved.get_status_display()}.")
    return redirect("requests-detail", pk=saved.pk)


def _form_initial(draft: QuotaRequest) -> dict:
    return {
        "team": draft.team_id,
        "justification": draft.justification,
        "kind": draft.kind,
        "starts_at": draft.starts_at,
        "ends_at": draft.ends_at,
    }


@login_required
@require_http_methods(["GET", "POST"])
def request_new(request: HttpRequest) -> HttpResponse:
    teams = teams_requestable_by(request.user)
    if not teams.exists():
        return render(
            request,
            "approvals/refused.html",
            {"message": "Only team leads and platform admins request quota."},
            status=403,
        )
    if request.method == "GET":
        initial = {}
        if request.GET.get("team"):
            initial["team"] = request.GET["team"]
        form = RequestForm(teams=teams, initial=initial)
        return _render_form(request, form=form, formset=line_formset(teams), teams=teams)

    form = RequestForm(request.POST, teams=teams)
    formset = line_formset(teams, data=request.POST)
    if not (form.is_valid() and formset.is_valid()):
        return _render_form(request, form=form, formset=formset, teams=teams, status=400)
    filled = filled_line_forms(formset)
    form_indices = [index for index, _ in filled]
    inputs = [line.line_input() for _, line in filled]
    try:
        created = request_create(
            team=form.cleaned_data["team"],
            acting_user=request.user,
            justification=form.cleaned_data["justification"],
            lines=inputs,
            kind=form.cleaned_data["kind"],
            starts_at=form.cleaned_data["starts_at"],
            ends_at=form.cleaned_data["ends_at"],
            submit=request.POST.get("action") == "submit",
        )
    except ApplicationError as exc:
        return _refused(
            request,
            exc,
            form=form,
            formset=formset,
            teams=teams,
            form_indices=form_indices,
            inputs=inputs,
        )
    return _saved(request, created)


@login_required
@require_http_methods(["GET", "POST"])
def request_edit(request: HttpRequest, pk: int) -> HttpResponse:
    draft = _visible_request(request.user, pk)
    teams = Team.objects.filter(pk=draft.team_id)
    if not request_may(request.user, draft, "edit"):
        return render(
            request,
            "approvals/refused.html",
            {"message": f"Only the requester or a lead of {draft.team.slug} edits this request."},
            status=403,
        )
    if draft.status not in EDITABLE:
        messages.error(request, f"Request #{draft.pk} is {draft.get_status_display()}.")
        return redirect("requests-detail", pk=draft.pk)
    if request.method == "GET":
        form = RequestForm(teams=teams, editing=True, initial=_form_initial(draft))
        formset = line_formset(teams, initial=[line_initial(li) for li in _lines(draft)], extra=2)
        return _render_form(request, form=form, formset=formset, teams=teams, draft=draft)

    form = RequestForm(request.POST, teams=teams, editing=True, initial=_form_initial(draft))
    formset = line_formset(teams, data=request.POST)
    if not (form.is_valid() and formset.is_valid()):
        return _render_form(
            request, form=form, formset=formset, teams=teams, draft=draft, status=400
        )
    filled = filled_line_forms(formset)
    form_indices = [index for index, _ in filled]
    inputs = [line.line_input() for _, line in filled]
    try:
        revised = request_revise(
            request=draft,
            acting_user=request.user,
            lines=inputs,
            justification=form.cleaned_data["justification"],
            submit=request.POST.get("action") == "submit",
        )
    except ApplicationError as exc:
        return _refused(
            request,
            exc,
            form=form,
            formset=formset,
            teams=teams,
            form_indices=form_indices,
            inputs=inputs,
            draft=draft,
        )
    return _saved(request, revised)


# --- detail and actions ---------------------------------------------------------------------


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
    errors=(),
    line_errors=None,
    status=200,
):
    user = request.user
    lines = _lines(qr)
    for line in lines:
        line.errors = (line_errors or {}).get(line.pk, [])
    approvals = list(qr.approvals.select_related("admin").order_by("created_at"))
    # The same answer the services enforce (approvals.selectors.request_may).
    allowed = request_actions_for(user, qr)
    may_decide = "decide" in allowed and not has_approved(user, qr)
    plan_problems = []
    if qr.status == S.SUBMITTED:
        plan_problems = [f.message for f in requests_fit_problems([qr])[qr.pk]]
    stale = request_base_changes(lines) if "rebase" in allowed else []
    approve_form = approve_form or ApproveForm(lines=lines)
    approve_form.lines = lines
    for line in lines:
        line.decided_fields = approve_form.line_fields(line)
        line.decided_removal = approve_form.removal_field(line)
        line.decided_class_fields = approve_form.class_fields(line)
    timeline = AuditEvent.objects.filter(target_type="QuotaRequest", target_id=str(qr.pk)).order_by(
        "seq"
    )
    return render(
        request,
        "approvals/request_detail.html",
        {
            "qr": qr,
            "lines": lines,
            "approvals": approvals,
            "timeline": timeline,
            "usage": _usage_rows(qr.usage_snapshot or {}),
            "snapshot_taken_at": (qr.usage_snapshot or {}).get("taken_at"),
            "errors": list(errors),
            "may_edit": "edit" in allowed,
            "may_submit": "submit" in allowed,
            "may_withdraw": "withdraw" in allowed,
            "may_delete": "delete" in allowed,
            "may_rebase": bool(stale),
            "may_revoke": "revoke" in allowed,
            "stale": stale,
            "may_decide": may_decide,
            "plan_problems": plan_problems,
            "may_preview": may_preview_in_clusters(user),
            "approve_form": approve_form,
            "reject_form": reject_form or CommentForm(prefix="reject"),
            "changes_form": changes_form or CommentForm(prefix="changes"),
            "revoke_form": revoke_form or CommentForm(prefix="revoke"),
        },
        status=status,
    )


@login_required
def request_detail(request: HttpRequest, pk: int) -> HttpResponse:
    return _render_detail(request, _visible_request(request.user, pk))


def _line_errors_from_findings(exc: ApplicationError, lines: list[RequestLine]) -> dict:
    by_name = {(li.team_namespace.name, li.resource.name): li.pk for li in lines}
    found: dict[int, list[str]] = {}
    for finding in exc.extra.get("errors") or []:
        line_id = by_name.get((finding.get("namespace"), finding.get("resource")))
        if line_id is not None:
            found.setdefault(line_id, []).append(finding["message"])
    return found


@login_required
@require_POST
def request_action(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    """One POST per action; the service re-checks who may do it."""
    qr = _visible_request(request.user, pk)
    user = request.user
    lines = _lines(qr)
    approve_form = reject_form = changes_form = revoke_form = None
    try:
        if action == "submit":
            request_submit(request=qr, acting_user=user)
        elif action == "withdraw":
            request_withdraw(request=qr, acting_user=user)
        elif action == "rebase":
            request_rebase(request=qr, acting_user=user)
        elif action == "delete":
            request_delete(request=qr, acting_user=user)
            messages.success(request, f"Draft #{pk} deleted.")
            return redirect("requests-list")
        elif action == "approve":
            approve_form = ApproveForm(request.POST, lines=lines)
            if not approve_form.is_valid():
                return _render_detail(request, qr, approve_form=approve_form, status=400)
            decisions = approve_form.decisions()
            try:
                request_approve(
                    request=qr,
                    acting_user=user,
                    comment=approve_form.cleaned_data["comment"],
                    decisions=decisions,
                )
            except ApplicationError as exc:
                match = LINE_FIELD.match(exc.field or "")
                if match and exc.field.startswith("decisions") and match.group(2):
                    line_id = decisions[int(match.group(1))].line_id
                    approve_form.add_error(f"decided-{line_id}-{match.group(2)}", exc.message)
                    return _render_detail(
                        request, qr, approve_form=approve_form, status=exc.status_code
                    )
                raise
        elif action in ("reject", "changes", "revoke"):
            comment_form = CommentForm(request.POST, prefix=action)
            if not comment_form.is_valid():  # too long: the form says so
                return _render_detail(request, qr, **{f"{action}_form": comment_form}, status=400)
            if action == "revoke":
                revoke_form = comment_form
                service = request_revoke
            elif action == "reject":
                reject_form = comment_form
                service = request_reject
            else:
                changes_form = comment_form
                service = request_changes
            try:
                service(request=qr, acting_user=user, comment=comment_form.cleaned_data["comment"])
            except ApplicationError as exc:
                if exc.field == "comment":
                    comment_form.add_error("comment", exc.message)
                    return _render_detail(
                        request,
                        qr,
                        reject_form=reject_form,
                        changes_form=changes_form,
                        revoke_form=revoke_form,
                        status=exc.status_code,
                    )
                raise
        else:
            raise Http404("no such action")
    except ApplicationError as exc:
        return _render_detail(
            request,
            qr,
            approve_form=approve_form,
            reject_form=reject_form,
            changes_form=changes_form,
            revoke_form=revoke_form,
            errors=[exc.message],
            line_errors=_line_errors_from_findings(exc, lines),
            status=exc.status_code,
        )
    qr.refresh_from_db()
    messages.success(request, f"Request #{qr.pk} is {qr.get_status_display()}.")
    return redirect("requests-detail", pk=qr.pk)


@login_required
def request_preview_page(request: HttpRequest, pk: int) -> HttpResponse:
    """What approving would change in each cluster, from server-side dry runs."""
    qr = _visible_request(request.user, pk)
    if not may_preview_in_clusters(request.user):
        return render(
            request,
            "approvals/refused.html",
            {"message": "Only platform admins and auditors preview requests in clusters."},
            status=403,
        )
    error = ""
    clusters = {}
    try:
        clusters = request_preview(qr)
    except KubeError as exc:
        error = f"cluster unreachable: {exc}"
    return render(
        request,
        "approvals/request_preview.html",
        {"qr": qr, "clusters": clusters, "error": error},
    )
