"""Readable, translated names of the audit log's actions (the codes stay English in the log),
and a short reading of an event's change in the reader's language: a field by its model's
name for it, a choice by its label, a stored text rendered again (the payload keeps the
English wording under the field and, for texts, the text under ``<field>_text``)."""

from functools import cache

from django.apps import apps
from django.core.exceptions import FieldDoesNotExist
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from common.amounts import amounts_as_written
from quotas.texts import Text

ACTION_LABELS = {
    "request.draft": _("Draft saved"),
    "request.submitted": _("Submitted"),
    "request.revised": _("Revised"),
    "request.approval": _("Approval given"),
    "request.decided": _("Decided"),
    "request.approved": _("Approved"),
    "request.rejected": _("Rejected"),
    "request.changes_requested": _("Changes requested"),
    "request.withdrawn": _("Withdrawn"),
    "request.revoked": _("Revoked"),
    "request.applying": _("Being applied"),
    "request.applied": _("Applied to the cluster"),
    "request.failed": _("Apply failed (retrying)"),
    "request.active": _("Temporary grant started"),
    "request.expiring": _("Temporary grant ends within a day"),
    "request.expired": _("Temporary grant ended and reverted"),
    "request.rebased": _("Rebased on the current allocation"),
    "request.deleted": _("Draft deleted"),
    "request.comment": _("Comment"),
    "request.extended": _("Temporary grant extended"),
    "allocation.changed": _("Allocation changed"),
    "capacity.changed": _("Capacity changed"),
    "capacity.deleted": _("Capacity removed"),
    "approval_policy.changed": _("Approval policy changed"),
    "priority_class.created": _("Priority class created"),
    "priority_class.changed": _("Priority class changed"),
    "priority_class.deleted": _("Priority class deleted"),
    "cluster.sync_mode": _("Cluster sync mode changed"),
    "cluster.created": _("Cluster added"),
    "cluster.changed": _("Cluster settings changed"),
    "cluster.deleted": _("Cluster removed"),
    "resource.created": _("Resource added"),
    "resource.changed": _("Resource changed"),
    "resource.deleted": _("Resource removed"),
    "team.created": _("Team added"),
    "team.changed": _("Team changed"),
    "team.deleted": _("Team removed"),
    "membership.created": _("Team member added"),
    "membership.changed": _("Team member's role changed"),
    "membership.deleted": _("Team member removed"),
    "namespace.created": _("Namespace added"),
    "namespace.changed": _("Namespace changed"),
    "namespace.deleted": _("Namespace removed"),
    "namespace.shadow": _("Namespace shadowed"),
    "user.created": _("User added"),
    "user.changed": _("User's roles or details changed"),
    "user.deleted": _("User removed"),
    "group.created": _("Group added"),
    "group.changed": _("Group changed"),
    "group.deleted": _("Group removed"),
    "api_token.create": _("API token created"),
    "api_token.revoke": _("API token revoked"),
    "sso_identity.created": _("Single sign-on identity linked"),
}


def action_label(action: str) -> str:
    """The label of an action code; an unknown code reads as its words."""
    label = ACTION_LABELS.get(action)
    if label is not None:
        return str(label)
    words = action.replace(".", " ").replace("_", " ").strip()
    return words[:1].upper() + words[1:]


SUMMARY_FIELDS = 4
EMPTY = "\u2013"  # an en dash, as the pages show an empty amount
SUMMARY_TEXT = 40


# Payload keys that are no model field, in words.
PAYLOAD_FIELD_LABELS = {
    "warnings": _("warnings"),
    "policy": _("approval rule"),
    "lines": _("lines"),
    "approvals": _("approvals"),
    "needed": _("approvals needed"),
    "approvals_dropped": _("approvals withdrawn"),
    "auto_approved": _("approved automatically"),
    "grant": _("temporary grant"),
    "grant_status": _("grant status"),
    "ends_at_before": _("ended before"),
    "taken_back": _("taken back"),
    "request": _("request"),
    "request_status": _("request status"),
    "target": _("to"),
    "kind": _("kind"),
    "changes": _("changes"),
    "errors": _("errors"),
    "characters": _("characters"),
    "code": _("code"),
}
TEXT_SUFFIX = "_text"  # "policy_text": the text the English "policy" is rendered from


@cache
def _model(target_type: str):
    """The model an event's target type names (its class name), or None."""
    for model in apps.get_models():
        if model.__name__ == target_type:
            return model
    return None


def _field(target_type: str, key: str):
    model = _model(target_type) if target_type else None
    if model is None:
        return None
    try:
        return model._meta.get_field(key)
    except FieldDoesNotExist:
        return None


def _field_label(target_type: str, key: str) -> str:
    field = _field(target_type, key)
    label = getattr(field, "verbose_name", None) if field is not None else None
    if label is None:
        label = PAYLOAD_FIELD_LABELS.get(key) or PAYLOAD_FIELD_LABELS.get(key.removesuffix("s"))
    return str(label) if label is not None else key


def _choice_words(target_type: str, key: str, value):
    """A status or other choice as its label ("approved" -> the reader's word for it)."""
    field = _field(target_type, key)
    if key in {"request_status", "grant_status"}:
        field = _field("QuotaRequest", "status")
    choices = getattr(field, "flatchoices", None) if field is not None else None
    if choices and isinstance(value, str | int):
        return dict(choices).get(value, value)
    return value


def _rendered(stored):
    """A ``<field>_text`` entry rendered: one text, or a list of them joined."""
    try:
        if isinstance(stored, dict):
            return str(Text.from_json(stored))
        if isinstance(stored, list) and stored:
            return gettext("; ").join(str(Text.from_json(t)) for t in stored)
    except (AttributeError, KeyError, TypeError, ValueError):
        pass
    return None


def _value_text(value) -> str:
    if value is None or value == "":
        return EMPTY
    if isinstance(value, list):
        if all(not isinstance(v, dict | list) for v in value):
            text = gettext(", ").join(str(v) for v in value) or EMPTY
        else:
            text = ngettext("%(count)d item", "%(count)d items", len(value)) % {"count": len(value)}
    elif isinstance(value, dict):
        text = "{…}"
    else:
        text = amounts_as_written(str(value))
    return text if len(text) <= SUMMARY_TEXT else text[: SUMMARY_TEXT - 1] + "…"


def audit_change_summary(before, after, target_type: str = "") -> list[str]:
    """A short reading of an event's payload: each field that changed as ``field: old → new``
    (a new one as ``field: value``), at most SUMMARY_FIELDS of them and a count of the rest;
    fields, choices and stored texts in the reader's language (``target_type``: the event's,
    whose model names its fields)."""
    old = before if isinstance(before, dict) else {}
    new = after if isinstance(after, dict) else {}

    def shown(payload: dict, key: str) -> str:
        rendered = _rendered(payload.get(key + TEXT_SUFFIX))
        if rendered is not None:
            return _value_text(rendered)
        return _value_text(_choice_words(target_type, key, payload.get(key)))

    def is_text_of_another(payload: dict, key: str) -> bool:
        return key.endswith(TEXT_SUFFIX) and key.removesuffix(TEXT_SUFFIX) in payload

    lines = []
    for key in [*new, *(k for k in old if k not in new)]:
        if is_text_of_another(new, key) or is_text_of_another(old, key):
            continue
        if key in old and key in new and old[key] == new[key]:
            continue
        label = _field_label(target_type, key)
        if key not in old:
            lines.append(f"{label}: {shown(new, key)}")
        else:
            lines.append(f"{label}: {shown(old, key)} → {shown(new, key)}")
    if len(lines) > SUMMARY_FIELDS:
        rest = len(lines) - SUMMARY_FIELDS
        more = ngettext("and %(count)d more field", "and %(count)d more fields", rest)
        lines = [*lines[:SUMMARY_FIELDS], more % {"count": rest}]
    return lines
