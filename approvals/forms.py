"""Forms of the request pages: they parse input only; the rules live in approvals.lifecycle."""

from django import forms
from django.forms import formset_factory
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from approvals.lines import KEEP, Decision, LineInput
from approvals.models import (
    COMMENT_MAX_LENGTH,
    JUSTIFICATION_MAX_LENGTH,
    MAX_LINES,
    QuotaRequest,
    RequestLine,
)
from common.amounts import AmountFormField, format_amount
from quotas.models import ClusterCapacity, PriorityClass, Team, TeamNamespace

DATETIME_LOCAL = "%Y-%m-%dT%H:%M"


class DateTimeLocalInput(forms.DateTimeInput):
    input_type = "datetime-local"

    def __init__(self, **kwargs):
        super().__init__(format=DATETIME_LOCAL, **kwargs)


class RequestForm(forms.Form):
    """The request itself; on an existing request only the justification may change."""

    team = forms.ModelChoiceField(
        queryset=Team.objects.none(),
        empty_label=_("choose a team"),
        label=_("Team"),
        error_messages={"invalid_choice": _("choose one of the teams you may request quota for")},
    )
    justification = forms.CharField(
        label=_("Justification"),
        max_length=JUSTIFICATION_MAX_LENGTH,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=_("Why the team needs this (workloads, deadlines, usage)."),
    )
    kind = forms.ChoiceField(
        label=_("Kind"),
        choices=QuotaRequest.Kind.choices,
        initial=QuotaRequest.Kind.PERMANENT,
        widget=forms.RadioSelect,
    )
    starts_at = forms.DateTimeField(
        label=_("Starts at"),
        required=False,
        widget=DateTimeLocalInput(),
        input_formats=[DATETIME_LOCAL, "%Y-%m-%dT%H:%M:%S"],
        help_text=_("Temporary only; empty = as soon as approved."),
    )
    ends_at = forms.DateTimeField(
        label=_("Ends at"),
        required=False,
        widget=DateTimeLocalInput(),
        input_formats=[DATETIME_LOCAL, "%Y-%m-%dT%H:%M:%S"],
        help_text=_("Temporary only: the previous allocation comes back then."),
    )

    def __init__(self, *args, teams, editing: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["team"].queryset = teams.order_by("slug")
        if editing:
            for name in ("team", "kind", "starts_at", "ends_at"):
                self.fields[name].disabled = True
                self.fields[name].required = False


class LineForm(forms.Form):
    """One allocation to change; choices are set per user by the formset's form_kwargs."""

    team_namespace = forms.TypedChoiceField(coerce=int, label=_("Namespace"))
    resource = forms.TypedChoiceField(coerce=int, label=_("Resource"))
    guarantee = AmountFormField(label=_("Guarantee"), min_value=0, decimal_places=3, max_digits=12)
    cap = AmountFormField(label=_("Cap"), min_value=0, decimal_places=3, max_digits=12)
    # Blank per-pod max and no class chosen keep the current values; removing them is the
    # explicit choice of the two boxes below (and counts as widening for the policy).
    per_pod_max = AmountFormField(
        required=False, min_value=0, decimal_places=3, max_digits=12, label=_("Per-pod max")
    )
    remove_per_pod_max = forms.BooleanField(required=False, label=_("remove per-pod max"))
    priority_classes = forms.MultipleChoiceField(
        required=False, label=_("Priority classes"), widget=forms.SelectMultiple(attrs={"size": 3})
    )
    any_priority_class = forms.BooleanField(required=False, label=_("no class restriction"))

    def __init__(self, *args, namespaces, resources, priority_classes, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["team_namespace"].choices = [("", _("choose")), *namespaces]
        self.fields["resource"].choices = [("", _("choose")), *resources]
        self.fields["priority_classes"].choices = [(n, n) for n in priority_classes]
        # Warnings of the plan rules, by field name (errors are the form's own errors).
        self.warnings: dict[str, list[str]] = {}

    def clean(self):
        data = super().clean()
        check_removals(self, data)
        return data

    def line_input(self) -> LineInput:
        data = self.cleaned_data
        return LineInput(
            team_namespace_id=data["team_namespace"],
            resource_id=data["resource"],
            guarantee=data["guarantee"],
            cap=data["cap"],
            per_pod_max=per_pod_max_choice(data.get("per_pod_max"), data.get("remove_per_pod_max")),
            priority_classes=classes_choice(
                data.get("priority_classes"), data.get("any_priority_class")
            ),
        )


# One rule for the request form and the approve form (and the API's null / []): a blank
# per-pod max or no class chosen keeps what stands; removing either is an explicit tick.


def per_pod_max_choice(value, remove: bool):
    if remove:
        return None
    return KEEP if value is None else value


def classes_choice(chosen, any_class: bool):
    if any_class:
        return ()
    return tuple(chosen) if chosen else KEEP


def check_removals(form: forms.Form, data: dict, prefix: str = "") -> None:
    """A value and its removal at once is a contradiction: said at the field."""
    if data.get(f"{prefix}remove_per_pod_max") and data.get(f"{prefix}per_pod_max") is not None:
        form.add_error(
            f"{prefix}per_pod_max",
            gettext("give a per-pod max or tick remove per-pod max, not both"),
        )
    if data.get(f"{prefix}any_priority_class") and data.get(f"{prefix}priority_classes"):
        form.add_error(
            f"{prefix}priority_classes",
            gettext("choose classes or tick no class restriction, not both"),
        )


def line_choices(teams) -> dict:
    """Namespaces of the given teams (grouped by team) and the resources of their clusters."""
    namespaces = (
        TeamNamespace.objects.filter(team__in=teams)
        .select_related("team", "cluster")
        .order_by("team__slug", "cluster__name", "name")
    )
    grouped: dict[str, list] = {}
    for ns in namespaces:
        grouped.setdefault(ns.team.slug, []).append((ns.pk, f"{ns.name} ({ns.cluster.name})"))
    capacities = ClusterCapacity.objects.filter(
        cluster_id__in={ns.cluster_id for ns in namespaces}
    ).select_related("resource")
    resources = {c.resource_id: c.resource for c in capacities}
    return {
        "namespaces": list(grouped.items()),
        "resources": [
            (r.pk, f"{r.display_name} ({r.name})")
            for r in sorted(resources.values(), key=lambda r: r.name)
        ],
        "priority_classes": list(
            PriorityClass.objects.order_by("-value", "name").values_list("name", flat=True)
        ),
    }


def line_formset(teams, *, data=None, initial=None, extra: int = 3):
    # A forged TOTAL_FORMS would otherwise have the server build and check 1,000 lines.
    formset_class = formset_factory(
        LineForm,
        extra=extra,
        can_delete=True,
        max_num=MAX_LINES,
        absolute_max=MAX_LINES,
        validate_max=True,
    )
    return formset_class(
        data=data, initial=initial, prefix="lines", form_kwargs=line_choices(teams)
    )


def line_initial(line: RequestLine) -> dict:
    """A saved line as the form shows it; a removal it asks for shows as the ticked box."""
    return {
        "team_namespace": line.team_namespace_id,
        "resource": line.resource_id,
        "guarantee": format_amount(line.requested_guarantee),
        "cap": format_amount(line.requested_cap),
        "per_pod_max": format_amount(line.requested_per_pod_max),
        "remove_per_pod_max": line.requested_per_pod_max is None
        and line.current_per_pod_max is not None,
        "priority_classes": list(line.requested_priority_classes),
        "any_priority_class": not line.requested_priority_classes
        and bool(line.current_priority_classes),
    }


def filled_line_forms(formset) -> list[tuple[int, LineForm]]:
    """(form index, form) of the lines the user filled in and did not remove."""
    return [
        (index, form)
        for index, form in enumerate(formset.forms)
        if form.has_changed() and form.cleaned_data and not form.cleaned_data.get("DELETE")
    ]


class CommentForm(forms.Form):
    """The comment of a reject or ask-for-changes; the service says when it is missing."""

    LABELS = {
        "reject": _("Why reject (required)"),
        "changes": _("Which changes (required)"),
        "revoke": _("Why revoke (required)"),
    }

    comment = forms.CharField(
        required=False, max_length=COMMENT_MAX_LENGTH, widget=forms.Textarea(attrs={"rows": 2})
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["comment"].label = self.LABELS.get(self.prefix, _("Comment"))


class DiscussionForm(forms.Form):
    """A comment of the discussion; the service says what is wrong with the text."""

    prefix = "discussion"
    text = forms.CharField(
        label=_("Your comment"),
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=_("Read by the team's leads and the platform admins, and kept in the audit log."),
    )


class ExtendForm(forms.Form):
    """A later end for a running temporary grant; the service checks it."""

    prefix = "extend"
    ends_at = forms.DateTimeField(
        label=_("New end"),
        required=False,
        widget=DateTimeLocalInput(),
        input_formats=[DATETIME_LOCAL, "%Y-%m-%dT%H:%M:%S"],
        help_text=_("After the current end; the admins decide it like any request."),
    )
    justification = forms.CharField(
        label=_("Why the team needs it longer"),
        required=False,
        max_length=JUSTIFICATION_MAX_LENGTH,
        widget=forms.Textarea(attrs={"rows": 2}),
    )


class ApproveForm(forms.Form):
    """Optional decided values per line: approving a modified amount, per-pod max or set of
    priority classes; the same choices the API's decisions offer."""

    AMOUNTS = ("guarantee", "cap", "per_pod_max")
    AMOUNT_LABELS = {
        "guarantee": _("decided guarantee"),
        "cap": _("decided cap"),
        "per_pod_max": _("decided per-pod max"),
    }

    comment = forms.CharField(
        label=_("Comment"),
        required=False,
        max_length=COMMENT_MAX_LENGTH,
        widget=forms.Textarea(attrs={"rows": 2}),
    )

    def __init__(self, *args, lines: list[RequestLine], **kwargs):
        super().__init__(*args, **kwargs)
        self.lines = lines
        class_names = list(
            PriorityClass.objects.order_by("-value", "name").values_list("name", flat=True)
        )
        for line in lines:
            for part in self.AMOUNTS:
                self.fields[f"decided-{line.pk}-{part}"] = AmountFormField(
                    required=False,
                    min_value=0,
                    decimal_places=3,
                    max_digits=12,
                    label=self.AMOUNT_LABELS[part],
                )
            self.fields[f"decided-{line.pk}-remove_per_pod_max"] = forms.BooleanField(
                required=False, label=_("remove per-pod max")
            )
            # A class the allocation allows may be gone from the catalogue: still offered.
            kept = set(line.current_priority_classes) | set(line.final_priority_classes)
            names = class_names + sorted(kept - set(class_names))
            self.fields[f"decided-{line.pk}-priority_classes"] = forms.MultipleChoiceField(
                required=False,
                choices=[(n, n) for n in names],
                widget=forms.SelectMultiple(attrs={"size": 3}),
                label=_("decided priority classes"),
            )
            self.fields[f"decided-{line.pk}-any_priority_class"] = forms.BooleanField(
                required=False, label=_("no class restriction")
            )

    def line_fields(self, line: RequestLine) -> list:
        return [self[f"decided-{line.pk}-{p}"] for p in self.AMOUNTS]

    def removal_field(self, line: RequestLine):
        return self[f"decided-{line.pk}-remove_per_pod_max"]

    def class_fields(self, line: RequestLine) -> list:
        return [
            self[f"decided-{line.pk}-priority_classes"],
            self[f"decided-{line.pk}-any_priority_class"],
        ]

    def clean(self):
        data = super().clean()
        for line in self.lines:
            check_removals(self, data, prefix=f"decided-{line.pk}-")
        return data

    def decisions(self) -> list[Decision]:
        """A Decision for every line where the admin changed at least one value."""
        decisions = []
        for line in self.lines:
            values = {
                p: self.cleaned_data.get(f"decided-{line.pk}-{p}")
                for p in (
                    *self.AMOUNTS,
                    "remove_per_pod_max",
                    "priority_classes",
                    "any_priority_class",
                )
            }
            if not any(v not in (None, False, []) for v in values.values()):
                continue
            classes = classes_choice(values["priority_classes"], values["any_priority_class"])
            decisions.append(
                Decision(
                    line_id=line.pk,
                    # A blank field keeps what stands (requested, or decided before).
                    guarantee=line.final_guarantee
                    if values["guarantee"] is None
                    else values["guarantee"],
                    cap=line.final_cap if values["cap"] is None else values["cap"],
                    per_pod_max=per_pod_max_choice(
                        values["per_pod_max"], values["remove_per_pod_max"]
                    ),
                    priority_classes=None if classes is KEEP else classes,
                )
            )
        return decisions
