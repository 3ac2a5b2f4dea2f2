"""What a request would meet, without doing it: the validation findings and the policy decision
of a submit (or, for a submitted request, of its approval), and the cluster objects it would
change (dry-run writes, for admins and auditors).

The checks are the lifecycle's own (``request_create``, ``validate_lines``, ``policy_decision``),
run inside a transaction that is always rolled back, so a preview and a submit can never
disagree and a preview leaves nothing behind.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from django.contrib.auth.models import User
from django.db import transaction

from approvals import lifecycle
from approvals.access import EDITABLE, may_preview_in_clusters
from approvals.lines import LineInput, ordered_lines, refresh_current
from approvals.models import QuotaRequest, RequestLine
from approvals.policy.clusters import policy_decision
from approvals.policy.rules import PolicyDecision
from approvals.selectors import allocation_changes, request_base_changes
from approvals.validation import validate_lines
from quotas.kube.client import KubeError
from quotas.kube.plan import AllocationChange
from quotas.kube.sync import Outcome, cluster_preview
from quotas.models import Team
from quotas.rules import Finding

# Requests judged as on submit (those submitted from, the editable ones); the others as on
# approval (decided values, who must approve).
_AS_ON_SUBMIT = EDITABLE


def request_preview(request: QuotaRequest) -> dict[str, list[Outcome]]:
    """Per cluster, what approving the request would change, from server-side dry runs."""
    return lines_preview(
        allocation_changes(request.lines.select_related("team_namespace__cluster", "resource"))
    )


def lines_preview(
    changes: dict[tuple[int, str], list[AllocationChange]],
) -> dict[str, list[Outcome]]:
    """Per cluster name, the dry-run outcomes of the changes (calls the clusters: run it
    outside any transaction)."""
    return {
        name: cluster_preview(cluster_id=cluster_id, changes=cluster_changes)
        for (cluster_id, name), cluster_changes in changes.items()
    }


@dataclass
class RequestCheck:
    """What submitting (or approving) would meet now."""

    judged_as: str  # "submit" or "approve"
    findings: list[Finding]
    policy: PolicyDecision
    lines: list[RequestLine]
    # Fields of allocations changed since the lines were written (a rebase is needed first).
    stale: list[dict]
    # Per cluster name, the objects a sync would write; None: not asked (or not allowed).
    clusters: dict[str, list[Outcome]] | None = None
    cluster_error: str = ""
    errors: list[Finding] = field(init=False)
    warnings: list[Finding] = field(init=False)

    def __post_init__(self) -> None:
        self.errors = [f for f in self.findings if f.is_error]
        self.warnings = [f for f in self.findings if not f.is_error]


class _RollBack(Exception):
    pass


def _judge(request: QuotaRequest) -> tuple[RequestCheck, dict]:
    """Inside the caller's (rolled back) transaction: the check, and the cluster changes."""
    stale = request_base_changes(ordered_lines(request))  # before current_* move to now
    refresh_current(request)
    lines = ordered_lines(request)
    as_submit = request.status in _AS_ON_SUBMIT
    findings = validate_lines(lines, final=not as_submit, exclude_request_id=request.pk)
    has_errors = any(f.is_error for f in findings)
    decision = policy_decision(request, lines, has_errors=has_errors, auto=as_submit)
    check = RequestCheck(
        judged_as="submit" if as_submit else "approve",
        findings=findings,
        policy=decision,
        lines=lines,
        stale=stale,
    )
    return check, allocation_changes(lines)


def _with_clusters(
    check: RequestCheck,
    changes: dict[tuple[int, str], list[AllocationChange]],
    user: User,
    *,
    wanted: bool = True,
) -> RequestCheck:
    if not wanted or not may_preview_in_clusters(user):
        return check
    try:
        check.clusters = lines_preview(changes)
    except KubeError as exc:
        check.clusters = {}
        check.cluster_error = f"cluster unreachable: {exc}"
    return check


def request_check(
    *, request: QuotaRequest, acting_user: User, with_clusters: bool = True
) -> RequestCheck:
    """A saved request (visible to ``acting_user``): what submitting it now would meet (a draft
    or one sent back for changes), or approving it (any other). Without ``with_clusters`` no
    cluster is called (no dry-run diff)."""
    result: list = []
    try:
        with transaction.atomic():
            result[:] = _judge(QuotaRequest.objects.get(pk=request.pk))
            raise _RollBack
    except _RollBack:
        pass
    check, changes = result
    return _with_clusters(check, changes, acting_user, wanted=with_clusters)


def request_revision_check(
    *,
    request: QuotaRequest,
    acting_user: User,
    lines: Iterable[LineInput],
    justification: str | None = None,
    with_clusters: bool = True,
) -> RequestCheck:
    """A saved draft (or a request sent back for changes) with new lines, unsaved: refused as
    ``request_revise`` would refuse it, else what submitting it would meet. Nothing is kept."""
    result: list = []
    try:
        with transaction.atomic():
            revised = lifecycle.request_revise(
                request=request, acting_user=acting_user, lines=lines, justification=justification
            )
            result[:] = _judge(revised)
            raise _RollBack
    except _RollBack:
        pass
    check, changes = result
    return _with_clusters(check, changes, acting_user, wanted=with_clusters)


def request_draft_check(
    *,
    team: Team,
    acting_user: User,
    justification: str,
    lines: Iterable[LineInput],
    kind: str = QuotaRequest.Kind.PERMANENT,
    starts_at: datetime | None = None,
    ends_at: datetime | None = None,
    with_clusters: bool = True,
) -> RequestCheck:
    """An unsaved request: refused as ``request_create`` would refuse it (who, dates, lines),
    else what submitting it would meet. Nothing is kept."""
    result: list = []
    try:
        with transaction.atomic():
            draft = lifecycle.request_create(
                team=team,
                acting_user=acting_user,
                justification=justification,
                lines=lines,
                kind=kind,
                starts_at=starts_at,
                ends_at=ends_at,
            )
            result[:] = _judge(draft)
            raise _RollBack
    except _RollBack:
        pass
    check, changes = result
    return _with_clusters(check, changes, acting_user, wanted=with_clusters)
