"""Readable, translated names of the audit log's actions (the codes stay English in the log)."""

from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from common.amounts import amounts_as_written

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


def _value_text(value) -> str:
    if value is None or value == "":
        return EMPTY
    if isinstance(value, list):
        if all(not isinstance(v, dict | list) for v in value):
            text = ", ".join(str(v) for v in value) or EMPTY
        else:
            text = ngettext("%(count)d item", "%(count)d items", len(value)) % {"count": len(value)}
    elif isinstance(value, dict):
        text = "{…}"
    else:
        text = amounts_as_written(str(value))
    return text if len(text) <= SUMMARY_TEXT else text[: SUMMARY_TEXT - 1] + "…"


def audit_change_summary(before, after) -> list[str]:
    """A short reading of an event's payload: each field that changed as ``field: old → new``
    (a new one as ``field: value``), at most SUMMARY_FIELDS of them and a count of the rest."""
    old = before if isinstance(before, dict) else {}
    new = after if isinstance(after, dict) else {}
    lines = []
    for key in [*new, *(k for k in old if k not in new)]:
        if key in old and key in new and old[key] == new[key]:
            continue
        if key not in old:
            lines.append(f"{key}: {_value_text(new[key])}")
        else:
            lines.append(f"{key}: {_value_text(old[key])} → {_value_text(new.get(key))}")
    if len(lines) > SUMMARY_FIELDS:
        rest = len(lines) - SUMMARY_FIELDS
        more = ngettext("and %(count)d more field", "and %(count)d more fields", rest)
        lines = [*lines[:SUMMARY_FIELDS], more % {"count": rest}]
    return lines
