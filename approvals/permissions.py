"""Who may act on a request, raising the clear refusal: the services' side of
approvals.selectors.request_may, which the pages ask to show their buttons."""

from django.contrib.auth.models import User

from approvals.models import QuotaRequest
from approvals.selectors import request_may
from common.errors import PermissionDenied
from quotas.roles import is_platform_admin


def require_requester(user: User, request: QuotaRequest) -> None:
    # The same answer the request page asks to show its Edit and Submit buttons.
    if not request_may(user, request, "edit"):
        raise PermissionDenied(
            f"only the requester or a lead of {request.team.slug} may do this", field="request"
        )


def require_platform_admin(user: User) -> None:
    if not is_platform_admin(user):
        raise PermissionDenied("only platform admins decide quota requests")
