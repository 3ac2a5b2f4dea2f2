"""Template context shared by every page of the UI shell."""

from django.http import HttpRequest

from quotas.roles import is_auditor, is_platform_admin


def roles(request: HttpRequest) -> dict:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"is_platform_admin": False, "is_auditor": False}
    return {"is_platform_admin": is_platform_admin(user), "is_auditor": is_auditor(user)}
