"""Writes of people and role groups: what makes someone a platform admin or an auditor
(quotas.roles: active, superuser, the role groups) and what the admin lets them open (staff,
permissions). Each change is audited in its transaction with the roles before and after;
passwords are never recorded.

Team roles (leads, members) are memberships: quotas.teams.

Writes that do not come through these services (Django's ``createsuperuser``, the shell, a
script) are audited too, by the receivers at the end (``user_changed_elsewhere``): an event
with no actor, in the write's transaction where there is one, right after the write otherwise.
"""

from collections.abc import Iterable

from django.conf import settings
from django.contrib.auth.models import Group, Permission, User
from django.db import router, transaction
from django.db.models import ProtectedError, QuerySet
from django.db.models.deletion import Collector
from django.utils.translation import gettext as _

from common.errors import ValidationFailed
from quotas.audit.chain import audit_changed_fields, audit_record
from quotas.locks import lock_group, lock_user
from quotas.roles import AUDITORS, PLATFORM_ADMINS, is_auditor, is_platform_admin
from quotas.services import deleted_or_refused, model_checked

ROLE_GROUPS = (PLATFORM_ADMINS, AUDITORS)
# Set on a User while user_save writes it: the receivers below leave it to the service.
AUDITED_BY_SERVICE = "_portal_audited_by_service"
# Saves of only these fields change no role (a login, a new password).
NO_ROLE_FIELDS = frozenset({"last_login", "password"})
LINK_ACTIONS = frozenset(
    {"pre_add", "pre_remove", "pre_clear", "post_add", "post_remove", "post_clear"}
)
OUTSIDE_COMMENT = "written outside the portal's services (a command, the shell or a script)"


def _permission_names(permissions) -> list[str]:
    return sorted(
        f"{app}.{codename}"
        for app, codename in permissions.values_list("content_type__app_label", "codename")
    )


def _portal_roles(user: User) -> list[str]:
    # Read as quotas.roles reads them, from a fresh row (roles.py keeps a user's groups on it).
    fresh = User.objects.get(pk=user.pk)
    roles = []
    if is_platform_admin(fresh):
        roles.append("platform admin")
    if is_auditor(fresh):
        roles.append("auditor")
    return roles


def _user_state(user: User) -> dict:
    return {
        "username": user.get_username(),
        "email": user.email,
        "first_name": user.first_name,
        "last_name": user.last_name,
        "is_active": user.is_active,
        "is_staff": user.is_staff,
        "is_superuser": user.is_superuser,
        "groups": sorted(user.groups.values_list("name", flat=True)),
        "user_permissions": _permission_names(user.user_permissions),
        "portal_roles": _portal_roles(user),
    }


def user_save(
    *,
    user: User,
    groups: Iterable[Group] | None = None,
    user_permissions: Iterable[Permission] | None = None,
    acting_user: User | None,
    comment: str = "",
) -> User:
    """Create a user or change them, with their groups and permissions (None: unchanged), as
    one audited change: the fields that changed and the portal roles before and after."""
    with transaction.atomic():
        old = lock_user(user.pk) if user.pk else None
        before = _user_state(old) if old is not None else None
        model_checked(user, exclude=["password", "last_login", "date_joined"])
        setattr(user, AUDITED_BY_SERVICE, True)
        try:
            user.save()
            if groups is not None:
                user.groups.set(list(groups))
            if user_permissions is not None:
                user.user_permissions.set(list(user_permissions))
        finally:
            delattr(user, AUDITED_BY_SERVICE)
        changes = audit_changed_fields(before, _user_state(user), keep=("username",))
        if changes is not None:
            audit_record(
                acting_user=acting_user,
                action="user.created" if before is None else "user.changed",
                target=user,
                before=changes[0],
                after=changes[1],
                comment=comment,
            )
    return user


def user_delete_problems(*, user: User) -> list[str]:
    """Why the user cannot be removed (empty: they can): rows that name them as who changed or
    decided something would lose it (SET NULL), rows that need them (PROTECT) would stop it.
    Such a user is deactivated instead, which takes every role and keeps the history."""
    collector = Collector(using=router.db_for_write(User))
    try:
        collector.collect([user])
    except ProtectedError as exc:
        named = sorted({o._meta.verbose_name_plural for o in exc.protected_objects})
    else:
        named = sorted(
            {
                f"{field.model._meta.verbose_name_plural} ({field.verbose_name})"
                for (field, _value), batches in collector.field_updates.items()
                for batch in batches
                if (batch.exists() if isinstance(batch, QuerySet) else batch)
            }
        )
    if not named:
        return []
    return [
        _(
            "%(user)s is named in %(rows)s: deactivate the user instead (active off), which "
            "takes their roles and keeps that history"
        )
        % {"user": user.get_username(), "rows": ", ".join(str(n) for n in named)}
    ]


def user_delete(*, user: User, acting_user: User | None, comment: str = "") -> None:
    """Remove a user no history names, and with them their team memberships: audited with
    what they had."""
    with transaction.atomic():
        locked = lock_user(user.pk)
        if locked is None:
            return
        problems = user_delete_problems(user=locked)
        if problems:
            raise ValidationFailed(problems[0], field="username")
        before = {
            **_user_state(locked),
            "teams": [
                f"{team} ({role})"
                for team, role in locked.team_memberships.order_by("team__slug").values_list(
                    "team__slug", "role"
                )
            ],
        }
        gone = User(pk=locked.pk, username=locked.get_username())  # the audit target
        deleted_or_refused(locked)
        audit_record(
            acting_user=acting_user,
            action="user.deleted",
            target=gone,
            before=before,
            after=None,
            comment=comment,
        )


def _group_state(group: Group) -> dict:
    return {"name": group.name, "permissions": _permission_names(group.permissions)}


def group_check(*, group: Group) -> None:
    """The role groups keep their names: quotas.roles finds platform admins and auditors by
    them (a renamed one would take everyone's role away)."""
    if group.pk is None:
        return
    stored = Group.objects.filter(pk=group.pk).values_list("name", flat=True).first()
    if stored in ROLE_GROUPS and group.name != stored:
        raise ValidationFailed(
            _("name: %(group)s is a role group of the portal; it keeps its name")
            % {"group": stored},
            field="name",
        )


def group_save(
    *,
    group: Group,
    permissions: Iterable[Permission] | None = None,
    acting_user: User | None,
    comment: str = "",
) -> Group:
    """Create a group or change its name or permissions (None: unchanged): audited."""
    with transaction.atomic():
        old = lock_group(group.pk) if group.pk else None
        before = _group_state(old) if old is not None else None
        group_check(group=group)
        model_checked(group)
        group.save()
        if permissions is not None:
            group.permissions.set(list(permissions))
        changes = audit_changed_fields(before, _group_state(group), keep=("name",))
        if changes is not None:
            audit_record(
                acting_user=acting_user,
                action="group.created" if before is None else "group.changed",
                target=group,
                before=changes[0],
                after=changes[1],
                comment=comment,
            )
    return group


def group_delete_problems(*, group: Group) -> list[str]:
    if group.name in ROLE_GROUPS:
        return [
            _("%(group)s is a role group of the portal: it is never removed")
            % {"group": group.name}
        ]
    return []


def group_delete(*, group: Group, acting_user: User | None, comment: str = "") -> None:
    """Remove a group (never a role group): audited with its members, who lose it."""
    with transaction.atomic():
        locked = lock_group(group.pk)
        if locked is None:
            return
        problems = group_delete_problems(group=locked)
        if problems:
            raise ValidationFailed(problems[0], field="name")
        before = {
            **_group_state(locked),
            "members": sorted(locked.user_set.values_list("username", flat=True)),
        }
        gone = Group(pk=locked.pk, name=locked.name)  # the audit target
        deleted_or_refused(locked)
        audit_record(
            acting_user=acting_user,
            action="group.deleted",
            target=gone,
            before=before,
            after=None,
            comment=comment,
        )


# --- writes outside the services ----------------------------------------------------------


def _elsewhere(user: User, update_fields) -> bool:
    """Whether this write of ``user`` is one the services do not audit themselves."""
    if not settings.AUDIT_USERS_WRITTEN_ELSEWHERE or getattr(user, AUDITED_BY_SERVICE, False):
        return False
    return not (update_fields and set(update_fields) <= NO_ROLE_FIELDS)


def user_before_elsewhere(sender, instance: User, raw=False, update_fields=None, **kwargs):
    """pre_save of User: the state a write outside the services starts from."""
    if raw or not _elsewhere(instance, update_fields):
        return
    old = User.objects.filter(pk=instance.pk).first() if instance.pk else None
    instance._portal_before = _user_state(old) if old is not None else None


def user_changed_elsewhere(
    sender, instance: User, created=False, raw=False, update_fields=None, **kwargs
):
    """post_save of User: a write outside the services, audited with what changed."""
    if raw or not _elsewhere(instance, update_fields):
        return
    before = instance.__dict__.pop("_portal_before", None)
    _record_elsewhere(instance, None if created else before)


def _record_elsewhere(user: User, before: dict | None) -> None:
    changes = audit_changed_fields(before, _user_state(user), keep=("username",))
    if changes is not None:
        audit_record(
            acting_user=None,
            action="user.created" if before is None else "user.changed",
            target=user,
            before=changes[0],
            after=changes[1],
            comment=OUTSIDE_COMMENT,
        )


def user_links_changed_elsewhere(sender, instance, action, reverse, pk_set, **kwargs):
    """m2m_changed of a user's groups and permissions, from either side (``user.groups.add``,
    ``group.user_set.remove``), outside the services."""
    if action not in LINK_ACTIONS or not settings.AUDIT_USERS_WRITTEN_ELSEWHERE:
        return
    if not reverse:
        users = [instance]
    elif action == "pre_clear":
        users = list(instance.user_set.all())
        instance._portal_cleared_users = users
    elif action == "post_clear":
        users = instance.__dict__.pop("_portal_cleared_users", [])
    else:
        users = list(User.objects.filter(pk__in=pk_set or ()))
    users = [u for u in users if not getattr(u, AUDITED_BY_SERVICE, False)]
    if action.startswith("pre_"):
        states = {u.pk: _user_state(u) for u in users}
        instance._portal_link_states = {**getattr(instance, "_portal_link_states", {}), **states}
        return
    states = instance.__dict__.pop("_portal_link_states", {})
    for user in users:
        _record_elsewhere(user, states.get(user.pk, _user_state(user)))
