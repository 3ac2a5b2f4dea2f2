"""Quota requests: the lines they change, the approvals they got, the policy that applies."""

from decimal import Decimal

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Length
from django.db.models.lookups import GreaterThan, LessThanOrEqual
from django.utils.translation import gettext_lazy as _

from quotas.models.fields import ZERO, amount_field
from quotas.texts import localized_messages, stored_message

# Free text people type: bounded in the database, the forms and the API alike.
JUSTIFICATION_MAX_LENGTH = 4000
# The most lines one request holds, and priority classes one line names (pages and API alike:
# longer lists are refused before any line is looked at).
MAX_LINES = 50
MAX_PRIORITY_CLASSES = 32
COMMENT_MAX_LENGTH = 2000


class QuotaRequest(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft", _("draft")
        SUBMITTED = "submitted", _("submitted")
        CHANGES_REQUESTED = "changes_requested", _("changes requested")
        APPROVED = "approved", _("approved")
        REJECTED = "rejected", _("rejected")
        WITHDRAWN = "withdrawn", _("withdrawn")
        REVOKED = "revoked", _("revoked")
        APPLYING = "applying", _("applying")
        APPLIED = "applied", _("applied")
        FAILED = "failed", _("failed (retrying)")
        ACTIVE = "active", _("active (temporary)")
        EXPIRED = "expired", _("expired (reverted)")

    class Kind(models.TextChoices):
        PERMANENT = "permanent", _("permanent")
        TEMPORARY = "temporary", _("temporary")
        # A later end for a running temporary grant (``extends``): approved like any change,
        # it moves the grant's end and changes no allocation.
        EXTENSION = "extension", _("extension of a temporary grant")

    team = models.ForeignKey(
        "quotas.Team", on_delete=models.PROTECT, related_name="requests", verbose_name=_("team")
    )
    # The suggestion this request was made from, if any: one open request per suggestion.
    suggestion = models.ForeignKey(
        "usage.Suggestion",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("suggestion"),
    )
    # The running temporary grant an extension moves the end of (kind extension only).
    extends = models.ForeignKey(
        "self",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="extensions",
        verbose_name=_("extends"),
    )
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        related_name="quota_requests",
        verbose_name=_("requested by"),
    )
    justification = models.TextField(
        max_length=JUSTIFICATION_MAX_LENGTH, verbose_name=_("justification")
    )
    kind = models.CharField(
        max_length=10, choices=Kind.choices, default=Kind.PERMANENT, verbose_name=_("kind")
    )
    starts_at = models.DateTimeField(null=True, blank=True, verbose_name=_("starts at"))
    ends_at = models.DateTimeField(null=True, blank=True, verbose_name=_("ends at"))
    status = models.CharField(
        max_length=20, choices=Status.choices, default=Status.DRAFT, verbose_name=_("status")
    )
    created_at = models.DateTimeField(auto_now_add=True, verbose_name=_("created at"))
    updated_at = models.DateTimeField(auto_now=True, verbose_name=_("updated at"))
    submitted_at = models.DateTimeField(null=True, blank=True, verbose_name=_("submitted at"))
    decided_at = models.DateTimeField(null=True, blank=True, verbose_name=_("decided at"))
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("decided by"),
    )
    decision_comment = models.TextField(
        blank=True, max_length=COMMENT_MAX_LENGTH, verbose_name=_("decision comment")
    )
    auto_approved = models.BooleanField(default=False, verbose_name=_("auto approved"))
    approvals_needed = models.PositiveSmallIntegerField(
        default=1, verbose_name=_("approvals needed")
    )
    # Why the policy decided as it did (approved automatically, one or two admins, and why).
    policy_reason = models.TextField(blank=True, verbose_name=_("policy reason"))
    # The same as msgid and parameters (quotas.texts), to show it in the reader's language.
    policy_reason_text = models.JSONField(
        default=dict, blank=True, verbose_name=_("policy reason text")
    )
    # What validation said at submit and at approval (warnings are kept, errors blocked).
    findings = models.JSONField(default=list, blank=True, verbose_name=_("findings"))
    # The team's allocations (and usage, where known) when the request was submitted.
    usage_snapshot = models.JSONField(default=dict, blank=True, verbose_name=_("usage snapshot"))
    sync_requests = models.ManyToManyField(
        "quotas.SyncRequest", blank=True, related_name="+", verbose_name=_("sync requests")
    )
    expiry_notified_at = models.DateTimeField(
        null=True, blank=True, verbose_name=_("expiry notified at")
    )
    reverted_at = models.DateTimeField(null=True, blank=True, verbose_name=_("reverted at"))

    class Meta:
        verbose_name = _("quota request")
        verbose_name_plural = _("quota requests")
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["status", "kind"], name="request_status_kind"),
            # The lists' default order (pages and API): a page reads its rows from here, not
            # every request joined and sorted first. With the team: a lead's list passes over
            # the other teams' requests in the index, without reading them from the table.
            models.Index(fields=["-created_at", "-id", "team"], name="request_newest_first"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(LessThanOrEqual(Length("justification"), JUSTIFICATION_MAX_LENGTH))
                & Q(LessThanOrEqual(Length("decision_comment"), COMMENT_MAX_LENGTH)),
                name="request_text_length",
            ),
            models.CheckConstraint(
                condition=Q(kind="permanent") | (Q(ends_at__isnull=False)),
                name="request_temporary_has_end",
                violation_error_message="a temporary request needs an end",
            ),
            models.CheckConstraint(
                condition=(Q(kind="extension") & Q(extends__isnull=False))
                | (~Q(kind="extension") & Q(extends__isnull=True)),
                name="request_extension_names_its_grant",
                violation_error_message="an extension names the grant it extends, and only it",
            ),
            models.CheckConstraint(
                condition=Q(starts_at__isnull=True)
                | Q(ends_at__isnull=True)
                | Q(ends_at__gt=F("starts_at")),
                name="request_end_after_start",
                violation_error_message="the end must come after the start",
            ),
        ]

    def __str__(self) -> str:
        return f"request #{self.pk} ({self.team_id}, {self.status})"

    @property
    def is_temporary(self) -> bool:
        return self.kind == self.Kind.TEMPORARY

    @property
    def is_extension(self) -> bool:
        return self.kind == self.Kind.EXTENSION

    @property
    def localized_findings(self) -> list[dict]:
        """The stored findings with ``message`` in the reader's (active) language."""
        return localized_messages(self.findings or [])

    @property
    def localized_policy_reason(self) -> str:
        """The stored policy reason in the reader's (active) language."""
        return stored_message({"message": self.policy_reason, "text": self.policy_reason_text})


class RequestLine(models.Model):
    """One allocation the request changes: what it was, what was asked, what was decided."""

    request = models.ForeignKey(
        QuotaRequest, on_delete=models.CASCADE, related_name="lines", verbose_name=_("request")
    )
    team_namespace = models.ForeignKey(
        "quotas.TeamNamespace",
        on_delete=models.PROTECT,
        related_name="+",
        verbose_name=_("team namespace"),
    )
    resource = models.ForeignKey(
        "quotas.Resource", on_delete=models.PROTECT, related_name="+", verbose_name=_("resource")
    )

    current_guarantee = amount_field(_("current guarantee"), default=ZERO)
    current_cap = amount_field(_("current cap"), default=ZERO)
    current_per_pod_max = amount_field(_("current per-pod max"), null=True, blank=True)
    current_priority_classes = models.JSONField(
        default=list, blank=True, verbose_name=_("current priority classes")
    )
    current_version = models.PositiveIntegerField(
        null=True, blank=True, verbose_name=_("current version")
    )
    # The allocation version the requested values were written against (None: no allocation
    # yet). Approving is refused once the allocation moved on, until the request is rebased.
    base_version = models.PositiveIntegerField(
        null=True, blank=True, verbose_name=_("base version")
    )

    requested_guarantee = amount_field(_("requested guarantee"))
    requested_cap = amount_field(_("requested cap"))
    requested_per_pod_max = amount_field(_("requested per-pod max"), null=True, blank=True)
    requested_priority_classes = models.JSONField(
        default=list, blank=True, verbose_name=_("requested priority classes")
    )

    decided_guarantee = amount_field(_("decided guarantee"), null=True, blank=True)
    decided_cap = amount_field(_("decided cap"), null=True, blank=True)
    decided_per_pod_max = amount_field(_("decided per-pod max"), null=True, blank=True)
    decided_priority_classes = models.JSONField(
        null=True, blank=True, verbose_name=_("decided priority classes")
    )
    # Allocation version written when the request was applied (for a clean revert).
    applied_version = models.PositiveIntegerField(
        null=True, blank=True, verbose_name=_("applied version")
    )

    class Meta:
        verbose_name = _("request line")
        verbose_name_plural = _("request lines")
        ordering = ["request", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["request", "team_namespace", "resource"], name="line_unique_allocation"
            ),
            models.CheckConstraint(
                condition=Q(requested_guarantee__gte=ZERO)
                & Q(requested_cap__gte=ZERO)
                & Q(requested_guarantee__lte=F("requested_cap")),
                name="line_requested_valid",
                violation_error_message="requested guarantee must be between 0 and the cap",
            ),
            models.CheckConstraint(
                condition=Q(decided_cap__isnull=True)
                | (
                    Q(decided_guarantee__gte=ZERO)
                    & Q(decided_cap__gte=ZERO)
                    & Q(decided_guarantee__lte=F("decided_cap"))
                ),
                name="line_decided_valid",
                violation_error_message="decided guarantee must be between 0 and the cap",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.team_namespace} {self.resource}"

    @property
    def final_guarantee(self) -> Decimal:
        return (
            self.requested_guarantee if self.decided_guarantee is None else self.decided_guarantee
        )

    @property
    def final_cap(self) -> Decimal:
        return self.requested_cap if self.decided_cap is None else self.decided_cap

    @property
    def final_per_pod_max(self) -> Decimal | None:
        return self.requested_per_pod_max if self.decided_cap is None else self.decided_per_pod_max

    @property
    def final_priority_classes(self) -> list[str]:
        if self.decided_priority_classes is None:
            return list(self.requested_priority_classes)
        return list(self.decided_priority_classes)


class RequestComment(models.Model):
    """One message of the discussion on a request, by a lead of its team or a platform admin,
    before the decision or after it. Never edited: the audit log holds each one as written."""

    request = models.ForeignKey(
        QuotaRequest, on_delete=models.CASCADE, related_name="comments", verbose_name=_("request")
    )
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        related_name="+",
        verbose_name=_("author"),
    )
    text = models.TextField(max_length=COMMENT_MAX_LENGTH, verbose_name=_("text"))
    created_at = models.DateTimeField(auto_now_add=True, verbose_name=_("created at"))

    class Meta:
        verbose_name = _("request comment")
        verbose_name_plural = _("request comments")
        ordering = ["request", "created_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(LessThanOrEqual(Length("text"), COMMENT_MAX_LENGTH))
                & Q(GreaterThan(Length("text"), 0)),
                name="request_comment_length",
            ),
        ]

    def __str__(self) -> str:
        return f"comment #{self.pk} on request #{self.request_id}"


class Approval(models.Model):
    """One admin's yes; large changes need two distinct ones."""

    request = models.ForeignKey(
        QuotaRequest, on_delete=models.CASCADE, related_name="approvals", verbose_name=_("request")
    )
    admin = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        related_name="+",
        verbose_name=_("admin"),
    )
    created_at = models.DateTimeField(auto_now_add=True, verbose_name=_("created at"))
    comment = models.TextField(blank=True, max_length=COMMENT_MAX_LENGTH, verbose_name=_("comment"))

    class Meta:
        verbose_name = _("approval")
        verbose_name_plural = _("approvals")
        ordering = ["request", "created_at"]
        constraints = [
            models.CheckConstraint(
                condition=LessThanOrEqual(Length("comment"), COMMENT_MAX_LENGTH),
                name="approval_comment_length",
            ),
            models.UniqueConstraint(fields=["request", "admin"], name="approval_once_per_admin"),
        ]

    def __str__(self) -> str:
        return f"{self.admin} approved {self.request}"


class ApprovalPolicy(models.Model):
    """How requests touching a cluster are decided. Clusters without a row use the defaults."""

    cluster = models.OneToOneField(
        "quotas.Cluster",
        on_delete=models.CASCADE,
        related_name="approval_policy",
        verbose_name=_("cluster"),
    )
    auto_approve_decreases = models.BooleanField(
        default=True,
        help_text=_("Requests that only lower guarantees and caps apply at once."),
        verbose_name=_("auto approve decreases"),
    )
    auto_approve_increase_max = amount_field(
        _("auto-approve increases up to"),
        default=Decimal(1),
        help_text=_(
            "Increases of guarantee and cap up to this much per line are approved "
            "automatically while capacity allows; 0 turns it off."
        ),
    )
    two_admins_above = amount_field(
        _("two admins above"),
        default=Decimal(4),
        help_text=_("An increase of guarantee or cap above this much needs two distinct admins."),
    )
    auto_approve_budget = amount_field(
        _("auto-approval budget per team"),
        default=Decimal(2),
        help_text=_(
            "At most this much increase (summed over a team's requests) is approved "
            "automatically per team on this cluster within the period; past it, increases wait "
            "for an admin. 0 turns automatic increases off."
        ),
    )
    two_admins_for_higher_class = models.BooleanField(
        _("two admins for a higher priority class"),
        default=True,
        help_text=_(
            "Allowing a priority class valued above every class the allocation allows "
            "(adding it, or lifting the class restriction) needs two distinct admins: it lets "
            "the team preempt others. Off: one admin."
        ),
    )
    auto_approve_period_days = models.PositiveSmallIntegerField(
        _("auto-approval budget period (days)"),
        default=30,
        validators=[MinValueValidator(1)],
        help_text=_("The window, in days, over which the auto-approval budget is counted."),
    )

    class Meta:
        verbose_name = _("approval policy")
        verbose_name_plural = _("approval policies")
        constraints = [
            models.CheckConstraint(
                condition=Q(auto_approve_increase_max__gte=ZERO) & Q(two_admins_above__gte=ZERO),
                name="policy_thresholds_not_negative",
            ),
            models.CheckConstraint(
                condition=Q(auto_approve_budget__gte=ZERO) & Q(auto_approve_period_days__gte=1),
                name="policy_budget_valid",
                violation_error_message="the budget must not be negative and the period at "
                "least one day",
            ),
        ]

    def __str__(self) -> str:
        return f"policy of {self.cluster}"
