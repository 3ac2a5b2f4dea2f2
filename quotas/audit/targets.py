"""What an audit event is about, in words: the kind of target ("allocation", "quota request")
and the target itself ("nvidia.com/gpu of team-a-training on demo", "request #2 of team-a"),
read for a page of events with one query per kind, and a link where a page shows it.

The stored ``target_repr`` (part of the event's hash) stays as written; it is only shown, with
its amounts written as everywhere else (2.000 -> 2), when the target is gone or of a kind no
app describes."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from common.amounts import amounts_as_written
from quotas.models import Allocation, AuditEvent, Cluster, ClusterCapacity, Team, TeamNamespace

# Facts about one target: at least its "text"; what else a link needs ("cluster", "team").
Facts = dict[str, str]
Describe = Callable[[list[int]], dict[int, Facts]]
Page = Callable[[int, Facts | None], str]

TARGET_KIND_LABELS = {
    "Allocation": gettext_lazy("allocation"),
    "ApiToken": gettext_lazy("API token"),
    "ApprovalPolicy": gettext_lazy("approval policy"),
    "Cluster": gettext_lazy("cluster"),
    "ClusterCapacity": gettext_lazy("cluster capacity"),
    "Group": gettext_lazy("group"),
    "PriorityClass": gettext_lazy("priority class"),
    "QuotaRequest": gettext_lazy("quota request"),
    "Resource": gettext_lazy("resource"),
    "SsoIdentity": gettext_lazy("single sign-on identity"),
    "Team": gettext_lazy("team"),
    "TeamMembership": gettext_lazy("team membership"),
    "TeamNamespace": gettext_lazy("namespace"),
    "User": gettext_lazy("user"),
}

_DESCRIBE: dict[str, Describe] = {}
_PAGES: dict[str, Page] = {}


def audit_target_words(target_type: str, describe: Describe) -> None:
    """Register how targets of a type read: ids -> {id: facts}, for the ids that still exist."""
    _DESCRIBE[target_type] = describe


def audit_target_pages(target_type: str, page: Page) -> None:
    """Register the page of a target of a type: (id, its facts or None) -> URL ("" for none)."""
    _PAGES[target_type] = page


def audit_targets(events: Iterable[AuditEvent]) -> dict[int, dict[str, str]]:
    """Per event (by seq): ``kind`` (in words), ``text`` and ``link`` (may be empty)."""
    events = list(events)
    ids: dict[str, set[int]] = defaultdict(set)
    for event in events:
        if event.target_id.isdigit() and event.target_type in _DESCRIBE:
            ids[event.target_type].add(int(event.target_id))
    facts = {kind: _DESCRIBE[kind](sorted(pks)) for kind, pks in ids.items()}
    out = {}
    for event in events:
        pk = int(event.target_id) if event.target_id.isdigit() else None
        found = facts.get(event.target_type, {}).get(pk) if pk is not None else None
        text = found["text"] if found else amounts_as_written(event.target_repr or event.target_id)
        page = _PAGES.get(event.target_type)
        kind = TARGET_KIND_LABELS.get(event.target_type)
        out[event.seq] = {
            "kind": str(kind) if kind is not None else event.target_type,
            "text": text,
            "link": page(pk, found) if page is not None and pk is not None else "",
        }
    return out


def _allocations(ids: list[int]) -> dict[int, Facts]:
    rows = Allocation.objects.filter(pk__in=ids).values_list(
        "pk",
        "resource__name",
        "team_namespace__name",
        "team_namespace__cluster__name",
        "team_namespace__team__slug",
    )
    return {
        pk: {
            "text": _("%(resource)s of %(namespace)s on %(cluster)s")
            % {"resource": resource, "namespace": namespace, "cluster": cluster},
            "cluster": cluster,
            "team": team,
        }
        for pk, resource, namespace, cluster, team in rows
    }


def _namespaces(ids: list[int]) -> dict[int, Facts]:
    rows = TeamNamespace.objects.filter(pk__in=ids).values_list(
        "pk", "name", "cluster__name", "team__slug"
    )
    return {
        pk: {
            "text": _("%(namespace)s on %(cluster)s") % {"namespace": name, "cluster": cluster},
            "cluster": cluster,
            "team": team,
        }
        for pk, name, cluster, team in rows
    }


def _capacities(ids: list[int]) -> dict[int, Facts]:
    rows = ClusterCapacity.objects.filter(pk__in=ids).values_list(
        "pk", "resource__name", "cluster__name"
    )
    return {
        pk: {
            "text": _("%(resource)s on %(cluster)s") % {"resource": resource, "cluster": cluster},
            "cluster": cluster,
        }
        for pk, resource, cluster in rows
    }


def _clusters(ids: list[int]) -> dict[int, Facts]:
    rows = Cluster.objects.filter(pk__in=ids).values_list("pk", "name")
    return {pk: {"text": name, "cluster": name} for pk, name in rows}


def _teams(ids: list[int]) -> dict[int, Facts]:
    rows = Team.objects.filter(pk__in=ids).values_list("pk", "slug", "name")
    return {pk: {"text": f"{name} ({slug})", "team": slug} for pk, slug, name in rows}


audit_target_words("Allocation", _allocations)
audit_target_words("TeamNamespace", _namespaces)
audit_target_words("ClusterCapacity", _capacities)
audit_target_words("Cluster", _clusters)
audit_target_words("Team", _teams)
