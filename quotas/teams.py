"""Writes of teams, their memberships (who leads and who reads a team's requests) and their
namespaces: checked, audited in the same transaction, and synced where clusters show them.

The Django admin, seed_demo and anything else that changes these call only these services.
"""

from fractions import Fraction

from django.contrib.auth.models import User
from django.db import transaction
from django.utils.translation import gettext as _

from common.amounts import format_amount
from common.errors import ValidationFailed
from quotas.audit.chain import audit_changed_fields, audit_record
from quotas.budgets import over_ceiling_figures
from quotas.locks import (
    lock_deleted_with_namespace,
    lock_membership,
    lock_team,
    lock_team_budget,
    lock_team_namespace,
)
from quotas.models import Allocation, Team, TeamMembership, TeamNamespace
from quotas.selectors import TeamTree, ceiling_totals, team_gpus
from quotas.services import clusters_plan_changed, deleted_or_refused, model_checked

# --- ceilings over all clusters, when caps move between teams ----------------------------------


def _capped(**allocations) -> Fraction:
    """The GPUs at the caps of the teams or namespaces named (as quotas.budgets counts them)."""
    return sum((g.capped for g in team_gpus(**allocations).values()), Fraction(0))


def ceiling_move_check(
    *,
    counted_under: int,
    to_team_id: int,
    gpus: Fraction,
    field: str,
    what: str,
    tree: TeamTree | None = None,
) -> None:
    """Moving caps of ``gpus`` GPUs (now counted under team ``counted_under`` and the teams
    above it) to team ``to_team_id`` must keep every ceiling of that team and the teams above
    it that does not count them yet (rule team_gpu_ceiling, as a request's caps are held to
    it; what approved temporary grants will add is counted when their requests are checked).
    ``tree`` may be read already."""
    if gpus <= 0:
        return
    tree = tree or TeamTree.read()
    gaining = [
        t
        for t in tree.chain(to_team_id)
        if t in tree.ceilings and counted_under not in tree.subtree(t)
    ]
    for facts in ceiling_totals(tree, gaining).values():
        after = facts.capped + gpus
        if after > Fraction(facts.ceiling):
            raise ValidationFailed(
                _(
                    "%(field)s: moving %(what)s would bring the caps of team %(team)s over all "
                    "clusters to %(total)s GPUs, above its ceiling of %(ceiling)s (over by "
                    "%(over)s): raise the ceiling first, or lower caps (rule team_gpu_ceiling)"
                )
                % {
                    "field": field,
                    "what": what,
                    "team": facts.team,
                    **over_ceiling_figures(after, facts.ceiling),
                },
                field=field,
            )


# --- teams -------------------------------------------------------------------------------------


def _team_state(team: Team) -> dict:
    return {
        "slug": team.slug,
        "name": team.name,
        "description": team.description,
        "parent": team.parent.slug if team.parent_id else None,
        "contact_email": team.contact_email,
        "gpu_ceiling": None if team.gpu_ceiling is None else format_amount(team.gpu_ceiling),
    }


def _subtree_cluster_ids(team: Team) -> set[int]:
    """The clusters where the team or a team under it has a namespace (their queues name it)."""
    team_ids, frontier = {team.pk}, {team.pk}
    while frontier:
        frontier = set(
            Team.objects.filter(parent_id__in=frontier)
            .exclude(pk__in=team_ids)
            .values_list("pk", flat=True)
        )
        team_ids |= frontier
    return set(
        TeamNamespace.objects.filter(team_id__in=team_ids).values_list("cluster_id", flat=True)
    )


def team_check(*, team: Team) -> None:
    """A team is never its own department, however far up; moved under another, its caps and
    those of the teams under it must fit the ceilings they come under (ceiling_move_check)."""
    node, seen = team.parent, set()
    while node is not None and node.pk not in seen:
        if team.pk is not None and node.pk == team.pk:
            raise ValidationFailed(
                _("parent: %(parent)s is %(team)s or a team under it (no cycles)")
                % {"parent": team.parent.slug, "team": team.slug},
                field="parent",
            )
        seen.add(node.pk)
        node = node.parent
    if team.pk is None or team.parent_id is None:
        return
    stored = Team.objects.filter(pk=team.pk).values_list("parent_id", flat=True).first()
    if stored != team.parent_id:
        tree = TeamTree.read()
        ceiling_move_check(
            counted_under=team.pk,
            to_team_id=team.parent_id,
            gpus=_capped(team_ids=tree.subtree(team.pk)),
            field="parent",
            what=_("team %(team)s and the teams under it") % {"team": team.slug},
            tree=tree,
        )


def team_save(*, team: Team, acting_user: User | None, comment: str = "") -> Team:
    """Create a team or change it (as ``team`` holds it); audited; a new slug or parent syncs
    the clusters where its queues (and those of the teams under it) are written."""
    with transaction.atomic():
        old = None
        if team.pk:
            # The team and both its old and new departments, in one statement (id order).
            lock_team_budget(team.pk, *([team.parent_id] if team.parent_id else []))
            old = Team.objects.filter(pk=team.pk).first()
        before = _team_state(old) if old is not None else None
        model_checked(team)
        team_check(team=team)
        changes = audit_changed_fields(before, _team_state(team), keep=("slug",))
        if changes is None:
            return team
        team.save()
        if before is not None and {"slug", "parent"} & set(changes[1]):
            clusters_plan_changed(
                cluster_ids=_subtree_cluster_ids(team),
                acting_user=acting_user,
                reason=f"team {team.slug} changed",
            )
        audit_record(
            acting_user=acting_user,
            action="team.created" if before is None else "team.changed",
            target=team,
            before=changes[0],
            after=changes[1],
            comment=comment,
        )
    return team


def team_delete_problems(*, team: Team) -> list[str]:
    """Why the team cannot be removed now (empty: it can)."""
    problems = []
    namespaces = list(team.namespaces.order_by("name").values_list("name", flat=True)[:11])
    if namespaces:
        problems.append(
            _("team %(team)s has namespaces (%(namespaces)s): move or remove them first")
            % {
                "team": team.slug,
                "namespaces": ", ".join(namespaces[:10]) + (" …" if len(namespaces) > 10 else ""),
            }
        )
    children = list(team.children.order_by("slug").values_list("slug", flat=True)[:11])
    if children:
        problems.append(
            _("team %(team)s is the parent of %(children)s: give them another parent first")
            % {
                "team": team.slug,
                "children": ", ".join(children[:10]) + (" …" if len(children) > 10 else ""),
            }
        )
    return problems


def team_delete(*, team: Team, acting_user: User | None, comment: str = "") -> None:
    """Remove a team without namespaces or sub-teams, and with it its memberships: audited
    with the people it had (its requests, if any, keep it: the refusal names them)."""
    with transaction.atomic():
        locked = lock_team(team.pk)
        if locked is None:
            return
        problems = team_delete_problems(team=locked)
        if problems:
            raise ValidationFailed(problems[0], field="slug")
        before = {
            **_team_state(locked),
            "members": [
                f"{m.user.get_username()} ({m.role})"
                for m in locked.memberships.select_related("user").order_by("user__username")
            ],
        }
        gone = Team(pk=locked.pk, slug=locked.slug, name=locked.name)  # the audit target
        deleted_or_refused(locked)
        audit_record(
            acting_user=acting_user,
            action="team.deleted",
            target=gone,
            before=before,
            after=None,
            comment=comment,
        )


# --- memberships: who leads a team, who reads its requests ------------------------------------

# What names a membership in each of its events, whatever changed.
MEMBERSHIP_NAMED_BY = ("team", "team_id", "user")


def _membership_state(membership: TeamMembership) -> dict:
    return {
        "team": membership.team.slug,
        "team_id": membership.team_id,
        "user": membership.user.get_username(),
        "role": membership.role,
    }


def team_membership_save(
    *, membership: TeamMembership, acting_user: User | None, comment: str = ""
) -> TeamMembership:
    """Add a person to a team, or change their role (or the team or person of the row):
    audited, so who could read a team's requests, and when, is in the log."""
    with transaction.atomic():
        old = lock_membership(membership.pk) if membership.pk else None
        before = _membership_state(old) if old is not None else None
        model_checked(membership)
        changes = audit_changed_fields(
            before, _membership_state(membership), keep=MEMBERSHIP_NAMED_BY
        )
        if changes is None:
            return membership
        membership.save()
        audit_record(
            acting_user=acting_user,
            action="membership.created" if before is None else "membership.changed",
            target=membership,
            before=changes[0],
            after=changes[1],
            comment=comment,
        )
    return membership


def team_membership_delete(
    *, membership: TeamMembership, acting_user: User | None, comment: str = ""
) -> None:
    """Take a person off a team: audited."""
    with transaction.atomic():
        locked = lock_membership(membership.pk)
        if locked is None:
            return
        before = _membership_state(locked)
        gone = TeamMembership(
            pk=locked.pk, team=locked.team, user=locked.user, role=locked.role
        )  # the audit target
        locked.delete()
        audit_record(
            acting_user=acting_user,
            action="membership.deleted",
            target=gone,
            before=before,
            after=None,
            comment=comment,
        )


# --- team namespaces ---------------------------------------------------------------------------


def _namespace_state(namespace: TeamNamespace) -> dict:
    return {
        "name": namespace.name,
        "cluster": namespace.cluster.name,
        "team": namespace.team.slug,
        "workload_class": namespace.workload_class,
    }


def team_namespace_check(*, team_namespace: TeamNamespace) -> None:
    """A namespace with allocations stays on its cluster: moving it would carry guarantees to a
    cluster whose capacity never promised them. Given to another team, its caps must fit the
    ceilings they come under (ceiling_move_check)."""
    if team_namespace.pk is None:
        return
    stored = (
        TeamNamespace.objects.filter(pk=team_namespace.pk)
        .values_list("cluster_id", "team_id")
        .first()
    )
    if stored is None:
        return
    cluster_id, team_id = stored
    if team_namespace.team_id is not None and team_namespace.team_id != team_id:
        ceiling_move_check(
            counted_under=team_id,
            to_team_id=team_namespace.team_id,
            gpus=_capped(namespace_ids=[team_namespace.pk]),
            field="team",
            what=_("namespace %(namespace)s") % {"namespace": team_namespace.name},
        )
    if cluster_id == team_namespace.cluster_id:
        return
    if Allocation.objects.filter(team_namespace_id=team_namespace.pk).exists():
        raise ValidationFailed(
            _(
                "cluster: %(namespace)s has allocations on its cluster; a namespace with "
                "allocations stays there (release them by request, or make a new namespace)"
            )
            % {"namespace": team_namespace.name},
            field="cluster",
        )


def team_namespace_save(
    *, team_namespace: TeamNamespace, acting_user: User | None, comment: str = ""
) -> TeamNamespace:
    """Create a team namespace or change its name, team or workload class: audited, then the
    cluster (both, if it moved) is synced."""
    with transaction.atomic():
        if team_namespace.pk and (
            TeamNamespace.objects.filter(pk=team_namespace.pk)
            .exclude(team_id=team_namespace.team_id)
            .exists()
        ):
            lock_team_budget(team_namespace.team_id)  # teams before namespaces
        old = lock_team_namespace(team_namespace.pk) if team_namespace.pk else None
        before = _namespace_state(old) if old is not None else None
        team_namespace_check(team_namespace=team_namespace)
        model_checked(team_namespace, exclude=["shadow"])
        changes = audit_changed_fields(
            before, _namespace_state(team_namespace), keep=("name", "cluster")
        )
        if changes is None:
            return team_namespace
        if old is not None:
            team_namespace.shadow = old.shadow  # changed only by team_namespace_set_shadow
        team_namespace.save()
        clusters = {team_namespace.cluster_id} | ({old.cluster_id} if old is not None else set())
        clusters_plan_changed(
            cluster_ids=clusters,
            acting_user=acting_user,
            reason=f"namespace {team_namespace.name} changed",
        )
        audit_record(
            acting_user=acting_user,
            action="namespace.created" if before is None else "namespace.changed",
            target=team_namespace,
            before=changes[0],
            after=changes[1],
            comment=comment,
        )
    return team_namespace


def team_namespace_delete_problems(*, team_namespace: TeamNamespace) -> list[str]:
    """Why the namespace cannot be removed now (empty: it can): its allocations and their
    history go only through requests."""
    count = Allocation.objects.filter(team_namespace_id=team_namespace.pk).count()
    if not count:
        return []
    return [
        _(
            "%(namespace)s has %(count)s allocation(s): a namespace is removed once it has none "
            "(its history stays with them)"
        )
        % {"namespace": team_namespace.name, "count": count}
    ]


def team_namespace_delete(
    *, team_namespace: TeamNamespace, acting_user: User | None, comment: str = ""
) -> None:
    """Remove a namespace without allocations: audited, then its cluster is synced."""
    with transaction.atomic():
        lock_deleted_with_namespace(team_namespace.pk)
        try:
            locked = lock_team_namespace(team_namespace.pk)
        except TeamNamespace.DoesNotExist:
            return
        problems = team_namespace_delete_problems(team_namespace=locked)
        if problems:
            raise ValidationFailed(problems[0], field="name")
        before = _namespace_state(locked)
        gone = TeamNamespace(
            pk=locked.pk, name=locked.name, team=locked.team, cluster=locked.cluster
        )  # the audit target
        deleted_or_refused(locked)
        clusters_plan_changed(
            cluster_ids=[gone.cluster_id],
            acting_user=acting_user,
            reason=f"namespace {gone.name} removed",
        )
        audit_record(
            acting_user=acting_user,
            action="namespace.deleted",
            target=gone,
            before=before,
            after=None,
            comment=comment,
        )
