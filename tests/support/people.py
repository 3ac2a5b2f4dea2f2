"""Users with the portal's roles, made directly (not through an admin's audited write)."""

from django.contrib.auth.models import User

from quotas.roles import AUDITORS, PLATFORM_ADMINS, ensure_role_groups


def make_user(username: str, *, groups: tuple[str, ...] = (), staff: bool = False) -> User:
    user = User.objects.create_user(username, f"{username}@example.com", "pw", is_staff=staff)
    if groups:
        admins, auditors = ensure_role_groups()
        by_name = {PLATFORM_ADMINS: admins, AUDITORS: auditors}
        user.groups.add(*(by_name[g] for g in groups))
    return user
