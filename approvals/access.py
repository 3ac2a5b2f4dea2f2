"""The rulebook of quota requests: who may do what to a request, in which state.

One answer for the services (which enforce it), the pages and their buttons, the API and the
admin (which ask it). ``may(user, request, action)`` returns an ``Access``: true when allowed,
else the reason and its refusal text (one text per reason), raised by ``enforce()`` as the
error the services answer with (403 for who, 409 for the state). ``restrict`` is the same rule
for a queryset (the lists).

Actions: edit (revise), submit, rebase, withdraw, delete, approve, reject, changes (ask for
changes), revoke (a temporary grant before it starts), preview (in the clusters), comment (the
discussion on a request, in any status) and extend (ask for a later end of a running
temporary grant). When a
request may move is the transitions table's (approvals.transitions); this module adds who.
"""

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from django.db.models import QuerySet
from django.utils.translation import gettext_lazy as _

from approvals.models import QuotaRequest
from approvals.transitions import S, transition_refusal
from common.errors import ApplicationError, NotAllowed, PermissionDenied
from quotas.roles import AnyUser, is_platform_admin, sees_everything
from quotas.selectors import TeamScope, team_ids_of, teams_requestable_by

ACTIONS = (
    "edit",
    "submit",
    "rebase",
    "withdraw",
    "delete",
    "approve",
    "reject",
    "changes",
    "revoke",
    "preview",
    "comment",
    "extend",
)

# One text per reason a request is refused.
REFUSALS = {
    "requester_or_lead": _("only the requester or a lead of %(team)s may do this"),
    "requester_withdraws": _("only the requester withdraws a request"),
    "requester_deletes": _("only the requester deletes a draft"),
    "admins_decide": _("only platform admins decide quota requests"),
    "own_request": _("nobody approves their own request"),
    "approved_already": _("%(user)s approved request #%(id)s already; a second admin must approve"),
    "preview_in_clusters": _("Only platform admins and auditors preview requests in clusters."),
    "leads_request": _("only leads of %(team)s (or platform admins) may request quota for it"),
    "not_editable": _(
        "Request #%(id)s is %(status)s; only drafts and requests sent back for changes are edited."
    ),
    "not_rebasable": _(
        "request #%(id)s is %(status)s; only drafts and requests waiting for a decision are rebased"
    ),
    "not_deletable": _(
        "request #%(id)s is %(status)s; only drafts are deleted (withdraw it instead)"
    ),
    "discussion": _("only leads of %(team)s and platform admins take part in the discussion"),
    "not_extendable": _(
        "request #%(id)s is %(status)s; only a running temporary grant is extended "
        "(ask for a new temporary grant instead)"
    ),
    "extension_not_edited": _(
        "request #%(id)s extends a temporary grant: withdraw it and ask again for another end"
    ),
}

# The status an action moves a request to: the transitions table says from where.
_TARGETS = {
    "submit": S.SUBMITTED,
    "withdraw": S.WITHDRAWN,
    "approve": S.APPROVED,
    "reject": S.REJECTED,
    "changes": S.CHANGES_REQUESTED,
    "revoke": S.REVOKED,
}
# Actions that change a request without moving it: the statuses they are possible in.
EDITABLE = (S.DRAFT, S.CHANGES_REQUESTED)  # the statuses a request is submitted from
_STATUSES = {
    "edit": (EDITABLE, "not_editable"),
    "rebase": ((S.DRAFT, S.SUBMITTED, S.CHANGES_REQUESTED), "not_rebasable"),
    "delete": ((S.DRAFT,), "not_deletable"),
}
_DECISIONS = ("approve", "reject", "changes")


@dataclass(frozen=True)
class Access:
    """The answer to "may this user do this action to this request now": true when allowed;
    else ``reason`` (a key of REFUSALS, or "status" for the transitions table's refusal) and
    the refusal ``error`` that ``enforce()`` raises."""

    action: str
    reason: str = ""
    error: ApplicationError | None = field(default=None, compare=False)

    def __bool__(self) -> bool:
        return not self.reason

    @property
    def allowed(self) -> bool:
        return not self.reason

    @property
    def message(self) -> str:
        return self.error.message if self.error is not None else ""

    @property
    def status_code(self) -> int:
        return self.error.status_code if self.error is not None else 200

    def enforce(self) -> None:
        if self.error is not None:
            raise self.error


def _refused(
    action: str,
    reason: str,
    error_class: type[ApplicationError] = PermissionDenied,
    *,
    params: dict[str, Any] | None = None,
    field: str | None = "request",
    extra: dict[str, Any] | None = None,
) -> Access:
    text = str(REFUSALS[reason])
    if params:
        text = text % params
    return Access(action, reason, error_class(text, field=field, extra=extra))


class _Who:
    """What the user is to one request (each answer read once)."""

    def __init__(self, user: AnyUser, request: QuotaRequest):
        self.user, self.request = user, request

    @cached_property
    def active(self) -> bool:
        return bool(self.user.is_authenticated and self.user.is_active)

    @cached_property
    def requester(self) -> bool:
        return self.active and self.request.requested_by_id == self.user.pk

    @cached_property
    def requester_or_lead(self) -> bool:
        return self.requester or (self.active and may_request_for(self.user, self.request.team_id))

    @cached_property
    def platform_admin(self) -> bool:
        return self.active and is_platform_admin(self.user)


def _role(who: _Who, action: str) -> Access:
    request = who.request
    if action in ("edit", "submit", "rebase"):
        if not who.requester_or_lead:
            return _refused(action, "requester_or_lead", params={"team": request.team.slug})
    elif action == "withdraw":
        if not who.requester:
            return _refused(action, "requester_withdraws")
    elif action == "delete":
        if not who.requester:
            return _refused(action, "requester_deletes")
    elif action in _DECISIONS:
        if not who.platform_admin:
            return _refused(action, "admins_decide", field=None)
        if who.requester:
            return _refused(action, "own_request")
    elif action == "revoke":
        if not who.platform_admin:
            return _refused(action, "admins_decide", field=None)
    elif action == "preview":
        if not (who.active and may_preview_in_clusters(who.user)):
            return _refused(action, "preview_in_clusters", field=None)
    elif action == "comment":
        if not (who.platform_admin or (who.active and may_request_for(who.user, request.team_id))):
            return _refused(action, "discussion", params={"team": request.team.slug}, field=None)
    elif action == "extend":
        # An extension is a new request of the team: who may request quota for it.
        if not (who.active and may_request_for(who.user, request.team_id)):
            return _refused(action, "leads_request", params={"team": request.team.slug})
    else:
        raise ValueError(f"unknown request action {action!r}")
    return Access(action)


def _state(who: _Who, action: str) -> Access:
    request = who.request
    params = {"id": request.pk, "status": request.get_status_display()}
    if action == "extend" and not (request.is_temporary and request.status == S.ACTIVE):
        return _refused(
            action,
            "not_extendable",
            NotAllowed,
            params=params,
            field="status",
            extra={"status": request.status, "kind": request.kind},
        )
    if action == "edit" and request.is_extension:
        return _refused(
            action,
            "extension_not_edited",
            NotAllowed,
            params=params,
            field="kind",
            extra={"kind": request.kind},
        )
    if action in _TARGETS:
        refusal = transition_refusal(request, _TARGETS[action])
        if refusal is not None:
            return Access(action, "status", refusal)
    elif action in _STATUSES:
        statuses, reason = _STATUSES[action]
        if request.status not in statuses:
            return _refused(
                action,
                reason,
                NotAllowed,
                params=params,
                field="status",
                extra={"status": request.status},
            )
    return Access(action)


def _approvals(who: _Who, action: str) -> Access:
    """An admin approves a request once: a second approval comes from another admin."""
    if action == "approve" and has_approved(who.user, who.request):
        return _refused(
            action, "approved_already", params={"user": who.user.username, "id": who.request.pk}
        )
    return Access(action)


def may(
    user: AnyUser, request: QuotaRequest, action: str, *, who: bool = True, state: bool = True
) -> Access:
    """Whether ``user`` may ``action`` the request: their role (``who``), then the request's
    status (``state``; for approve also: not approved by this admin already). The services
    ask who before they lock the request, and the state once it is locked."""
    if action not in ACTIONS:
        raise ValueError(f"unknown request action {action!r}")
    person = _Who(user, request)
    if who and not (answer := _role(person, action)):
        return answer
    if state and not (answer := _state(person, action)):
        return answer
    if state:
        return _approvals(person, action)
    return Access(action)


def require(user: AnyUser, request: QuotaRequest, action: str, **parts: bool) -> None:
    """Raise the refusal unless ``may(user, request, action, **parts)``."""
    may(user, request, action, **parts).enforce()


def allowed_actions(user: AnyUser, request: QuotaRequest) -> set[str]:
    """What the user may do to the request now (its buttons; preview left out): the answers
    of ``may``, the status asked first so an action impossible in it costs no query."""
    person = _Who(user, request)
    return {
        action
        for action in ACTIONS
        if action != "preview"
        and _state(person, action)
        and _role(person, action)
        and _approvals(person, action)
    }


# --- without a request at hand ----------------------------------------------------------------


def may_request_for(user: AnyUser, team_id: int) -> bool:
    """Platform admins, and leads of the team (or of a department above it)."""
    return teams_requestable_by(user).filter(pk=team_id).exists()


def may_request(user: AnyUser, team) -> Access:
    """Whether the user may request quota for the team (a new request)."""
    if may_request_for(user, team.pk):
        return Access("request")
    return _refused("request", "leads_request", params={"team": team.slug}, field="team")


def may_preview_in_clusters(user: AnyUser) -> bool:
    """Who sees what a request would write in the clusters (server-side dry runs): platform
    admins and auditors."""
    return sees_everything(user)


def may_decide(user: AnyUser) -> bool:
    """Whether the user decides quota requests at all (platform admins)."""
    return bool(user.is_authenticated and user.is_active and is_platform_admin(user))


def require_platform_admin(user: AnyUser) -> None:
    if not may_decide(user):
        raise PermissionDenied(str(REFUSALS["admins_decide"]))


def has_approved(user: AnyUser, request: QuotaRequest) -> bool:
    """The admin approved the request already: a second approval must come from another."""
    return request.approvals.filter(admin_id=user.pk).exists()


# --- lists ------------------------------------------------------------------------------------


def restrict(
    requests: QuerySet[QuotaRequest],
    user: AnyUser,
    action: str = "view",
    *,
    scope: TeamScope | None = None,
) -> QuerySet[QuotaRequest]:
    """Of ``requests``, those the user may ``action``: view (admins and auditors every
    request, people of a team their team's), or approve (those waiting for this platform
    admin: submitted, not their own, not approved by them yet; as ``may`` answers one).
    ``scope``: the user's teams as this request read them already (quotas.selectors)."""
    if not user.is_authenticated or not user.is_active:
        return requests.none()
    if action == "view":
        if sees_everything(user):
            return requests
        team_ids = scope.visible_ids if scope is not None else team_ids_of(user)
        return requests.filter(team_id__in=team_ids)
    if action == "approve":
        if not is_platform_admin(user):
            return requests.none()
        return (
            requests.filter(status=S.SUBMITTED)
            .exclude(requested_by=user)
            .exclude(approvals__admin=user)
        )
    raise ValueError(f"no list restriction for {action!r}")
