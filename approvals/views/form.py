"""The request form: the new and edit pages, and the check the form's script asks for as one
types (``POST /requests/validate/``, ``POST /requests/<id>/validate/``).

The pages and the check parse with the same forms (RequestForm and the line formset) and run
the same service checks (approvals.preview: ``request_create`` or ``request_revise`` in a
transaction that is always rolled back, then the plan rules and the policy), so the messages
shown while typing are those a submit would meet. The script only places them; without it the
"Check" button asks the same from the page.
"""

import re
from dataclasses import dataclass, field
from decimal import Decimal

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.forms.utils import ErrorList
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_http_methods, require_POST

from approvals.access import may, may_request
from approvals.forms import (
    RequestForm,
    filled_line_forms,
    line_formset,
    line_initial,
)
from approvals.lifecycle import request_create, request_revise
from approvals.models import QuotaRequest
from approvals.preview import RequestCheck, request_draft_check, request_revision_check
from approvals.selectors import (
    CapacityImpact,
    impact_mig_layouts,
    request_impact,
    request_lines,
    requests_visible_to,
)
from approvals.validation import findings_json
from approvals.whatif import lines_what_if
from common.amounts import format_amount, is_plain_amount
from common.errors import ApplicationError
from quotas.models import Allocation, ClusterCapacity, Resource, Team, TeamNamespace
from quotas.selectors import teams_requestable_by

S = QuotaRequest.Status
LINE_FIELD = re.compile(r"^(?:lines|decisions)\[(\d+)\](?:\.(\w+))?")
# The API's way of naming where an error is ("lines[0].cap: ..."), which the page says in words.
API_WHERE = re.compile(r"^(?:lines|decisions)\[\d+\](?:\.\w+)?: ")
# Checked while the justification is still blank: no rule reads it, and the form itself says
# that it is missing. Never saved (the check is rolled back).
JUSTIFICATION_PENDING = "(not written yet)"


def _editable_request(user, pk: int) -> QuotaRequest | None:
    return requests_visible_to(user).select_related("team", "requested_by").filter(pk=pk).first()


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


def _current_text(values: dict | None) -> str:
    """The current allocation of a line, as its cell shows it before the script runs."""
    if values is None:
        return _("none yet")
    text = f"{values['guarantee']} / {values['cap']}"
    if values["per_pod_max"]:
        text += " " + _("(pod ≤ %(max)s)") % {"max": values["per_pod_max"]}
    if values["priority_classes"]:
        text += f" [{', '.join(values['priority_classes'])}]"
    return text


def _show_current(formset, current_values: dict) -> None:
    """Each row's current allocation, rendered on the server (the script refreshes it)."""
    for line in formset.forms:
        namespace = str(line["team_namespace"].value() or "")
        resource = str(line["resource"].value() or "")
        if namespace and resource:
            found = current_values["current"].get(namespace, {}).get(resource)
            line.current_text = _current_text(found)


# --- placing the services' answers next to the fields ----------------------------------------


def _line_keys(lines) -> list[tuple[str, str, str]]:
    """(cluster, namespace, resource) names of built request lines, in the form's order."""
    return [
        (li.team_namespace.cluster.name, li.team_namespace.name, li.resource.name) for li in lines
    ]


def _input_keys(inputs) -> list[tuple[str | None, str | None, str | None]]:
    """The same names for the lines of a form the service refused (nothing was built)."""
    namespaces = {
        pk: (cluster, name)
        for pk, name, cluster in TeamNamespace.objects.filter(
            pk__in=[i.team_namespace_id for i in inputs]
        ).values_list("pk", "name", "cluster__name")
    }
    resources = dict(
        Resource.objects.filter(pk__in=[i.resource_id for i in inputs]).values_list("pk", "name")
    )
    return [
        (*namespaces.get(i.team_namespace_id, (None, None)), resources.get(i.resource_id))
        for i in inputs
    ]


def _finding_line(finding: dict, keys) -> int | None:
    """The line a finding is about: its namespace, or for a sum over the cluster (no
    namespace) the first line of that cluster and resource."""
    for index, (cluster, namespace, resource) in enumerate(keys):
        if finding.get("resource") != resource or finding.get("cluster") != cluster:
            continue
        if finding.get("namespace") in ("", None, namespace):
            return index
    return None


def _place_findings(findings: list[dict], keys, *, formset, form_indices) -> list[dict]:
    """Plan-rule findings next to the line field they name: errors as the field's errors,
    warnings beside them. Returns what no line takes, as page messages."""
    loose = []
    for finding in findings:
        index = _finding_line(finding, keys)
        error = finding.get("level") == "error"
        if index is None or index >= len(form_indices):
            loose.append(_message(finding["message"], finding.get("rule", ""), error=error))
            continue
        target = formset.forms[form_indices[index]]
        name = finding.get("field")
        name = name if name in target.fields else None
        if error:
            target.add_error(name, ValidationError(finding["message"], code=finding.get("rule")))
        else:
            target.warnings.setdefault(name or "__all__", []).append(finding["message"])
    return loose


def _place_error(exc: ApplicationError, *, form, formset, form_indices) -> list[dict]:
    """A service refusal next to the field it names; returns it as a page message if none."""
    where = exc.field or ""
    match = LINE_FIELD.match(where)
    if match and int(match.group(1)) < len(form_indices):
        target = formset.forms[form_indices[int(match.group(1))]]
        name = match.group(2)
        target.add_error(name if name in target.fields else None, exc.message)
        return []
    if where in form.fields and not form.fields[where].disabled:
        form.add_error(where, exc.message)
        return []
    return [_message(exc.message, "")]


def _place_refusal(exc: ApplicationError, *, form, formset, form_indices, inputs) -> list[dict]:
    if exc.extra.get("errors"):
        findings = [*exc.extra["errors"], *exc.extra.get("warnings", [])]
        return _place_findings(
            findings, _input_keys(inputs), formset=formset, form_indices=form_indices
        )
    return _place_error(exc, form=form, formset=formset, form_indices=form_indices)


def _message(text: str, code: str, *, error: bool = True) -> dict:
    return {"message": str(text), "code": code, "level": "error" if error else "warning"}


def _describe_warnings(formset) -> None:
    """A field with a warning names it in aria-describedby, next to its help and errors."""
    for line in formset.forms:
        for name, warnings in line.warnings.items():
            if name not in line.fields or not warnings:
                continue
            bound = line[name]
            ids = [f"{bound.auto_id}_error"] if bound.errors else []
            ids.append(f"{bound.auto_id}_warning")
            line.fields[name].widget.attrs["aria-describedby"] = " ".join(ids)


def line_message(number: int, label, text) -> str:
    """An error of a request line as the page says it: the line (as numbered on the page) and
    the field in words, then the rule, without the API's "lines[0].cap: "."""
    text = API_WHERE.sub("", str(text), count=1)
    if label is None:
        return _("Line %(n)s: %(message)s") % {"n": number, "message": text}
    # The field's label as a word in the sentence ("Line 1, cap: ..."); no case in Chinese.
    return _("Line %(n)s, %(field)s: %(message)s") % {
        "n": number,
        "field": str(label).lower(),
        "message": text,
    }


def _name_line_errors(formset) -> None:
    """Every error of every line, named by its line and field (once per form)."""
    for index, line in enumerate(formset.forms):
        if getattr(line, "errors_named", False) or not line.errors:
            continue
        line.errors_named = True
        for name, errors in list(line.errors.items()):
            label = None if name == NON_FIELD_ERRORS else line.fields[name].label
            named = [
                ValidationError(line_message(index + 1, label, text), code=error.code)
                for error in errors.as_data()
                for text in error
            ]
            line._errors[name] = ErrorList(
                named, error_class="nonfield" if name == NON_FIELD_ERRORS else None
            )


# --- the check -------------------------------------------------------------------------------


@dataclass
class FormCheck:
    """The form as posted, with every answer placed: form errors, service refusals and plan
    findings on their fields, the rest as page messages; the impact once the lines were
    checked against the plan."""

    form: RequestForm
    formset: object
    draft: QuotaRequest | None
    messages: list[dict] = field(default_factory=list)
    check: RequestCheck | None = None
    impact: list[CapacityImpact] = field(default_factory=list)
    mig_layouts: list[dict] = field(default_factory=list)

    def forms(self) -> list:
        return [self.form, *self.formset.forms]

    @property
    def blocked(self) -> bool:
        """Lines were typed but errors keep them from being checked against the plan."""
        return (
            self.check is None
            and self.has_errors
            and any(line.has_changed() for line in self.formset.forms)
        )

    @property
    def has_errors(self) -> bool:
        return (
            any(f.errors for f in self.forms())
            or bool(self.formset.non_form_errors())
            or any(m["level"] == "error" for m in self.messages)
        )


def _bound_forms(request: HttpRequest, *, teams, draft):
    initial = _form_initial(draft) if draft else None
    form = RequestForm(request.POST, teams=teams, editing=draft is not None, initial=initial)
    return form, line_formset(teams, data=request.POST)


def _filled(formset) -> tuple[list[int], list]:
    filled = filled_line_forms(formset)
    return [index for index, _line in filled], [line.line_input() for _line_index, line in filled]


def _checkable(form: RequestForm, draft: QuotaRequest | None) -> bool:
    """The lines can be checked once the request's own fields parse (a blank justification
    is no obstacle: no rule reads it)."""
    if set(form.errors) - {"justification"}:
        return False
    return draft is not None or form.cleaned_data.get("team") is not None


def _check_form(
    request: HttpRequest, *, teams, draft=None, with_clusters: bool, live: bool = False
) -> FormCheck:
    form, formset = _bound_forms(request, teams=teams, draft=draft)
    result = FormCheck(form=form, formset=formset, draft=draft)
    form.is_valid()
    lines_valid = formset.is_valid()
    result.messages += [_message(e, "formset") for e in formset.non_form_errors()]
    if not lines_valid or not _checkable(form, draft):
        return result
    form_indices, inputs = _filled(formset)
    if live and not inputs:
        return result  # nothing typed yet: the submit says a request needs a line
    data = form.cleaned_data
    justification = data.get("justification")  # None: blank (the form says so) or unchanged
    try:
        if draft is None:
            check = request_draft_check(
                team=data["team"],
                acting_user=request.user,
                justification=justification or JUSTIFICATION_PENDING,
                lines=inputs,
                kind=data["kind"],
                starts_at=data.get("starts_at"),
                ends_at=data.get("ends_at"),
                with_clusters=with_clusters,
            )
        else:
            check = request_revision_check(
                request=draft,
                acting_user=request.user,
                lines=inputs,
                justification=justification,
                with_clusters=with_clusters,
            )
    except ApplicationError as exc:
        result.messages += _place_refusal(
            exc, form=form, formset=formset, form_indices=form_indices, inputs=inputs
        )
        return result
    result.messages += _place_findings(
        findings_json(check.findings),
        _line_keys(check.lines),
        formset=formset,
        form_indices=form_indices,
    )
    result.check = check
    team_id = draft.team_id if draft else data["team"].pk
    result.impact = request_impact(check.lines, team_id=team_id)
    result.mig_layouts = impact_mig_layouts(result.impact)
    return result


def _field_answers(result: FormCheck) -> list[dict]:
    """Per field with something to say: its id and name, its errors (message and code) and
    the rules' warnings."""
    answers = []
    for form in result.forms():
        warnings = getattr(form, "warnings", {})
        for bound in form:
            errors = [
                {"message": str(text), "code": error.code or ""}
                for error in bound.errors.as_data()
                for text in error
            ]
            found = warnings.get(bound.name, [])
            if errors or found:
                answers.append(
                    {
                        "id": bound.auto_id,
                        "name": bound.html_name,
                        "errors": errors,
                        "warnings": [str(w) for w in found],
                    }
                )
    return answers


def _row_messages(result: FormCheck) -> list[dict]:
    """Errors and warnings of a whole line (no single field), as page messages naming it."""
    _name_line_errors(result.formset)
    found = []
    for index, line in enumerate(result.formset.forms):
        found += [_message(text, "") for text in line.non_field_errors()]
        for text in line.warnings.get("__all__", []):
            found.append(_message(line_message(index + 1, None, text), "", error=False))
    return found


def _impact_html(request: HttpRequest, result: FormCheck) -> str:
    """The impact panel for what the form holds: the impact once checked, else why not."""
    return render_to_string("approvals/_impact.html", _impact_context(result), request=request)


def policy_text(check: RequestCheck) -> str:
    """Who must approve, as the impact panel says it."""
    if check.policy.auto_approve:
        return _("Would be approved automatically by the cluster's policy.")
    return ngettext(
        "Needs the approval of %(n)s platform admin.",
        "Needs the approvals of %(n)s platform admins.",
        check.policy.approvals_needed,
    ) % {"n": check.policy.approvals_needed}


def _impact_context(result: FormCheck) -> dict:
    check = result.check
    return {
        "check": check,
        "blocked": result.blocked,
        "impact": result.impact,
        "mig_layouts": result.mig_layouts,
        "policy_text": policy_text(check) if check else "",
        "clusters": check.clusters if check else None,
        "cluster_error": check.cluster_error if check else "",
        "what_if": lines_what_if(check.lines, saved=False) if check else [],
    }


def _check_json(request: HttpRequest, result: FormCheck) -> dict:
    _name_line_errors(result.formset)
    return {
        "ok": not result.has_errors,
        "checked": result.check is not None,
        "fields": _field_answers(result),
        "messages": [*result.messages, *_row_messages(result)],
        "impact_html": _impact_html(request, result),
    }


# --- the pages -------------------------------------------------------------------------------


def _form_initial(draft: QuotaRequest) -> dict:
    return {
        "team": draft.team_id,
        "justification": draft.justification,
        "kind": draft.kind,
        "starts_at": draft.starts_at,
        "ends_at": draft.ends_at,
    }


def _render_form(request, *, form, formset, teams, draft=None, result=None, status=200):
    current_values = _current_values(teams)
    _show_current(formset, current_values)
    _describe_warnings(formset)
    _name_line_errors(formset)
    loose = []
    if result is not None:
        loose = [*result.messages, *_row_messages(result)]
    context = {
        "form": form,
        "formset": formset,
        "draft": draft,
        "messages_found": loose,
        "action_url": reverse("requests-edit", args=[draft.pk])
        if draft
        else reverse("requests-new"),
        "validate_url": reverse("requests-validate-edit", args=[draft.pk])
        if draft
        else reverse("requests-validate"),
        "current_values": current_values,
        **(
            _impact_context(result)
            if result is not None
            else {"check": None, "blocked": False, "impact": [], "clusters": None}
        ),
    }
    return render(request, "approvals/request_form.html", context, status=status)


def _refused_page(request, message: str, status: int = 403) -> HttpResponse:
    return render(request, "approvals/refused.html", {"message": message}, status=status)


def _saved(request, saved: QuotaRequest) -> HttpResponse:
    saved.refresh_from_db()
    if saved.status == S.DRAFT:
        messages.success(request, _("Draft #%(id)s saved.") % {"id": saved.pk})
    else:
        messages.success(
            request,
            _("Request #%(id)s is %(status)s.")
            % {"id": saved.pk, "status": saved.get_status_display()},
        )
    return redirect("requests-detail", pk=saved.pk)


def _refused_form(request, *, teams, draft, status, exc=None) -> HttpResponse:
    """A refused save: the form again as typed, each error on its field, and the impact of
    what it holds (checked as the live check does), not the empty panel of a new form."""
    result = _check_form(request, teams=teams, draft=draft, with_clusters=False)
    if exc is not None and not result.has_errors:
        # Refused by something the check does not meet (the plan moved in between): said too.
        form_indices, inputs = _filled(result.formset)
        result.messages += _place_refusal(
            exc,
            form=result.form,
            formset=result.formset,
            form_indices=form_indices,
            inputs=inputs,
        )
    return _render_form(
        request,
        form=result.form,
        formset=result.formset,
        teams=teams,
        draft=draft,
        result=result,
        status=status,
    )


def _save(request, *, teams, draft=None) -> HttpResponse:
    """Save a draft or submit, as the form's two buttons ask; refused: the form again, each
    error on its field, nothing saved."""
    form, formset = _bound_forms(request, teams=teams, draft=draft)
    if not (form.is_valid() and formset.is_valid()):
        return _refused_form(request, teams=teams, draft=draft, status=400)
    _indices, inputs = _filled(formset)
    data = form.cleaned_data
    submit = request.POST.get("action") == "submit"
    try:
        if draft is None:
            saved = request_create(
                team=data["team"],
                acting_user=request.user,
                justification=data["justification"],
                lines=inputs,
                kind=data["kind"],
                starts_at=data["starts_at"],
                ends_at=data["ends_at"],
                submit=submit,
            )
        else:
            saved = request_revise(
                request=draft,
                acting_user=request.user,
                lines=inputs,
                justification=data["justification"],
                submit=submit,
            )
    except ApplicationError as exc:
        return _refused_form(request, teams=teams, draft=draft, status=exc.status_code, exc=exc)
    return _saved(request, saved)


def _checked_page(request, *, teams, draft=None) -> HttpResponse:
    """The "Check" button without the script: the same check, shown on the page."""
    result = _check_form(request, teams=teams, draft=draft, with_clusters=True)
    return _render_form(
        request,
        form=result.form,
        formset=result.formset,
        teams=teams,
        draft=draft,
        result=result,
    )


@login_required
@require_http_methods(["GET", "POST"])
def request_new(request: HttpRequest) -> HttpResponse:
    teams = teams_requestable_by(request.user)
    if not teams.exists():
        return _refused_page(request, _("Only team leads and platform admins request quota."))
    if request.method == "GET":
        initial = {"team": request.GET["team"]} if request.GET.get("team") else {}
        if not initial and len(only := list(teams.order_by("pk")[:2])) == 1:
            initial["team"] = only[0].pk  # the one team the user may request for: chosen
        form = RequestForm(teams=teams, initial=initial)
        lines = _prefilled_line(request, teams)
        formset = line_formset(teams, initial=lines, extra=3 - len(lines))
        return _render_form(request, form=form, formset=formset, teams=teams)
    if request.POST.get("action") == "check":
        return _checked_page(request, teams=teams)
    return _save(request, teams=teams)


def _prefilled_line(request: HttpRequest, teams) -> list[dict]:
    """A first line filled in from the query (``namespace``, ``resource``, ``guarantee``,
    ``cap``: a fix a page offers, such as a cap brought within the cluster's share): only a
    namespace of a team the user may ask for and an allocation it has; anything else is
    ignored, and nothing is asked until the user sends the form."""
    ns_id, resource_id = request.GET.get("namespace", ""), request.GET.get("resource", "")
    if not (ns_id.isdigit() and resource_id.isdigit()):
        return []
    allocation = Allocation.objects.filter(
        team_namespace_id=int(ns_id), resource_id=int(resource_id), team_namespace__team__in=teams
    ).first()
    if allocation is None:
        return []
    line = {
        "team_namespace": allocation.team_namespace_id,
        "resource": allocation.resource_id,
        "guarantee": format_amount(allocation.guarantee),
        "cap": format_amount(allocation.cap),
        "per_pod_max": "",
        "priority_classes": list(allocation.priority_classes),
    }
    for field_name in ("guarantee", "cap"):
        value = request.GET.get(field_name, "")
        if is_plain_amount(value):
            line[field_name] = value
    if allocation.per_pod_max is not None:
        # A per-pod max above the new cap would break its own rule: it comes down with it.
        cap = Decimal(line["cap"])
        line["per_pod_max"] = format_amount(min(allocation.per_pod_max, cap))
    return [line]


def _edit_refusal(user, draft: QuotaRequest) -> tuple[str, int] | None:
    """Why the user may not edit the request now (message, status), or None: the rulebook's
    answer (approvals.access), the one request_revise enforces."""
    access = may(user, draft, "edit")
    return None if access else (access.message, access.status_code)


@login_required
@require_http_methods(["GET", "POST"])
def request_edit(request: HttpRequest, pk: int) -> HttpResponse:
    draft = _editable_request(request.user, pk)
    if draft is None:
        raise Http404(_("No such request among those you may see."))
    refusal = _edit_refusal(request.user, draft)
    if refusal is not None and refusal[1] == 403:
        return _refused_page(request, refusal[0])
    if refusal is not None:
        messages.error(request, refusal[0])
        return redirect("requests-detail", pk=draft.pk)
    teams = Team.objects.filter(pk=draft.team_id)
    if request.method == "GET":
        form = RequestForm(teams=teams, editing=True, initial=_form_initial(draft))
        initial = [line_initial(li) for li in request_lines(draft)]
        formset = line_formset(teams, initial=initial, extra=2)
        return _render_form(request, form=form, formset=formset, teams=teams, draft=draft)
    if request.POST.get("action") == "check":
        return _checked_page(request, teams=teams, draft=draft)
    return _save(request, teams=teams, draft=draft)


# --- the live check --------------------------------------------------------------------------


def _json_refusal(message: str, status: int) -> JsonResponse:
    return JsonResponse({"message": message}, status=status)


def _answer(request: HttpRequest, *, teams, draft=None) -> JsonResponse:
    with_clusters = request.POST.get("clusters") == "1"
    result = _check_form(request, teams=teams, draft=draft, with_clusters=with_clusters, live=True)
    return JsonResponse(_check_json(request, result))


@login_required
@require_POST
def request_validate(request: HttpRequest) -> JsonResponse:
    """What the new-request form as posted would meet on submit, nothing saved: field errors
    and rule findings in the server's words, and the impact as an HTML fragment."""
    user = request.user
    teams = teams_requestable_by(user)
    if not teams.exists():
        return _json_refusal(_("Only team leads and platform admins request quota."), 403)
    # A team the user may not request for is refused as the create refuses it, not checked.
    team_id = request.POST.get("team", "")
    team = Team.objects.filter(pk=team_id).first() if team_id.isdigit() else None
    if team is not None and not (access := may_request(user, team)):
        return _json_refusal(access.message, access.status_code)
    return _answer(request, teams=teams)


@login_required
@require_POST
def request_validate_edit(request: HttpRequest, pk: int) -> JsonResponse:
    """The same for the edit form of a saved draft (or a request sent back for changes)."""
    draft = _editable_request(request.user, pk)
    if draft is None:
        return _json_refusal(_("no such request"), 404)
    refusal = _edit_refusal(request.user, draft)
    if refusal is not None:
        return _json_refusal(*refusal)
    return _answer(request, teams=Team.objects.filter(pk=draft.team_id), draft=draft)
