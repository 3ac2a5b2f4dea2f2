"""Who is who: platform admins and auditors are Django groups; leads and members are per team."""

from django.contrib.auth.models import AnonymousUser, Group, User
from django.db.models import Q, QuerySet

from common.migrating import tables_made

PLATFORM_ADMINS = "platform-admins"
AUDITORS = "auditors"

AnyUser = User | AnonymousUser


def _in_group(user: AnyUser, group: str) -> bool:
    if not user.is_authenticated or not user.is_active:
        return False
    # One query per check, unless the groups were read with the user (a signed-in web request:
    # portal.middleware.UserGroupsMiddleware; an API token: portal.tokens.api_token_user).
    return any(g.name == group for g in user.groups.all())


def is_platform_admin(user: AnyUser) -> bool:
    return bool(user.is_authenticated and user.is_active and user.is_superuser) or _in_group(
        user, PLATFORM_ADMINS
    )


def platform_admins() -> QuerySet[User]:
    """The users is_platform_admin answers yes for: active superusers and the group's members."""
    return User.objects.filter(is_active=True).filter(
        Q(groups__name=PLATFORM_ADMINS) | Q(is_superuser=True)
    )


def is_auditor(user: AnyUser) -> bool:
    return _in_group(user, AUDITORS)


def sees_everything(user: AnyUser) -> bool:
    """Admins and auditors see every team; auditors change nothing."""
    return is_platform_admin(user) or is_auditor(user)


def ensure_role_groups() -> tuple[Group, Group]:
    admins, _ = Group.objects.get_or_create(name=PLATFORM_ADMINS)
    auditors, _ = Group.objects.get_or_create(name=AUDITORS)
    return admins, auditors


# Apps whose models platform admins manage in the Django admin; auditors may view them all.
# (axes: failed logins; deleting an attempt unlocks the login.)
ADMIN_MANAGED_APPS = (
    "common",
    "portal",
    "quotas",
    "usage",
    "approvals",
    "django_celery_beat",
    "axes",
)


def sync_role_permissions(*, apps=None, **_kwargs) -> None:
    """Give the role groups their Django permissions (after every migrate; idempotent). Not
    before auth's and contenttypes' tables are made."""
    from django.contrib.auth.models import Permission

    if not tables_made(apps, "auth.Group", "auth.Permission", "contenttypes.ContentType"):
        return
    admins, auditors = ensure_role_groups()
    managed = Permission.objects.filter(content_type__app_label__in=ADMIN_MANAGED_APPS)
    user_views = Permission.objects.filter(
        content_type__app_label="auth", codename__in=["view_user", "view_group"]
    )
    admins.permissions.set([*managed, *user_views])
    auditors.permissions.set([p for p in [*managed, *user_views] if p.codename.startswith("view_")])
