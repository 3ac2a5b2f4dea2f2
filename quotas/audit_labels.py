"""Readable, translated names of the audit log's actions (the codes stay English in the log)."""

from django.utils.translation import gettext_lazy as _

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
    "allocation.changed": _("Allocation changed"),
    "capacity.changed": _("Capacity changed"),
    "capacity.deleted": _("Capacity removed"),
    "approval_policy.changed": _("Approval policy changed"),
    "priority_class.created": _("Priority class created"),
    "priority_class.changed": _("Priority class changed"),
    "priority_class.deleted": _("Priority class deleted"),
    "cluster.sync_mode": _("Cluster sync mode changed"),
    "namespace.shadow": _("Namespace shadowed"),
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
