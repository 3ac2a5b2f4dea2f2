"""Template context shared by every page of the UI shell."""

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from portal.models import WorkerHeartbeat
from quotas.roles import is_auditor, is_platform_admin


def roles(request: HttpRequest) -> dict:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"is_platform_admin": False, "is_auditor": False}
    return {"is_platform_admin": is_platform_admin(user), "is_auditor": is_auditor(user)}


def workers(request: HttpRequest) -> dict:
    """The Celery workers' last signs of life, for platform admins (shown on the cluster overview);
    read only by a page that shows them."""
    user = getattr(request, "user", None)

    def latest() -> list[WorkerHeartbeat]:
        if user is None or not is_platform_admin(user):
            return []
        return list(WorkerHeartbeat.objects.all()[:5])

    return {"workers": SimpleLazyObject(latest)}
