"""Who may act on a request, raising the clear refusal: the services' side of
approvals.selectors.request_may, the answer the pages ask to show their buttons."""

from django.contrib.auth.models import User
from django.utils.translation import gettext as _

from approvals.models import QuotaRequest
from approvals.selectors import request_may
from common.errors import PermissionDenied
from quotas.roles import is_platform_admin


def require_may(
    user: User, request: QuotaRequest, action: str, refusal: str, *, field: str | None = "request"
) -> None:
    """PermissionDenied(``refusal``) unless ``request_may(user, request, action)``."""
    if not request_may(user, request, action):
        raise PermissionDenied(refusal, field=field)


def require_requester(user: User, request: QuotaRequest) -> None:
    """Edit (revise, submit): the requester, leads of the team and platform admins."""
    require_may(
        user,
        request,
        "edit",
        _("only the requester or a lead of %(team)s may do this") % {"team": request.team.slug},
    )


def require_platform_admin(user: User) -> None:
    if not is_platform_admin(user):
        raise PermissionDenied(_("only platform admins decide quota requests"))
