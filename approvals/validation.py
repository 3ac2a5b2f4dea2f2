"""Validation of a request against the whole plan of every cluster it touches.

Builds the facts the pure rules in quotas.rules work on from the database: the cluster's
capacities and share, its current allocations (approved changes are written to allocations
at approval, so they count at once; those of the namespaces in question one by one, the rest
summed, so a request costs what it touches, not the cluster's size), plus the guarantee
temporary grants hold on top of them (the increase of a grant approved to start later, what a
started grant that lowered an allocation gives back at its end), and last month's typical daily
peaks of the namespaces in question from the usage rollups.
"""

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from decimal import Decimal
from fractions import Fraction

from django.utils import timezone

from approvals.budgets import HoldingLine, gpus_of, held_caps, holding_lines
from approvals.models import QuotaRequest, RequestLine
from quotas.budgets import CeilingChange, check_ceilings
from quotas.models import Cluster, ClusterCapacity
from quotas.rules import (
    AllocationFacts,
    ClusterFacts,
    Finding,
    PlanChange,
    UsageFacts,
    check_change,
)
from quotas.selectors import (
    TeamGpus,
    TeamTree,
    allocation_facts_of,
    ceiling_totals,
    cluster_facts,
    mig_resources_of,
    plan_capacities,
    team_gpus,
    top_priority_classes,
)
from quotas.texts import localized_messages
from usage.selectors import typical_daily_peaks


def held_by_grants(cluster_ids: Iterable[int]) -> dict[tuple[str, str], Decimal]:
    """Per (cluster, resource) name, the guarantee temporary grants hold on top of the
    allocations: promised, though not (or no longer) in the allocations themselves."""
    clusters = Cluster.objects.in_bulk(list(cluster_ids))
    held: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    for line in holding_lines(cluster_ids=clusters):
        amount = line.held_guarantee
        if amount > 0:
            held[(clusters[line.cluster_id].name, line.resource)] += amount
    return dict(held)


def _with_grants(
    clusters: dict[int, Cluster],
    grant_lines: list[HoldingLine],
    allocations: dict[int, dict[tuple[str, str], AllocationFacts]],
) -> None:
    """Add what the temporary grants promise to the clusters' plans (in place), as ``held``
    guarantee on top of the allocations (read with their namespaces' allocations).

    A grant approved to start later applies on top of the allocation as it is at its start:
    its increase is promised already (a decrease frees nothing: it comes back at the end). A
    started grant that lowered a guarantee restores the amount at its end, on top of whatever
    the allocation is then: that amount stays promised. (A started grant's increase is in
    the allocation itself.)
    """
    for line in grant_lines:
        key = (line.namespace, line.resource)
        held = line.held_guarantee
        if held <= 0:
            continue
        plan = allocations[line.cluster_id]
        now = plan.get(key) or AllocationFacts(
            cluster=clusters[line.cluster_id].name,
            namespace=key[0],
            resource=key[1],
            guarantee=Decimal(0),
            cap=Decimal(0),
            workload_class=line.workload_class,
        )
        plan[key] = replace(now, held=now.held + held)


@dataclass
class _ClusterPlan:
    """What the rules need of one cluster: its facts; the allocations of the namespaces in
    question (and of those temporary grants hold guarantee in), keyed by (namespace,
    resource); and the rest of the cluster's allocations summed per resource and priority
    classes (check_change's ``others``). Only the resources in question are read."""

    facts: ClusterFacts
    allocations: dict[tuple[str, str], AllocationFacts]
    others: tuple[AllocationFacts, ...] = ()
    # Last month's typical daily peaks of the namespaces in question, for the "guarantee
    # below 80% of peak" warning.
    usage: tuple[UsageFacts, ...] = ()


def _load_plans(
    wanted: dict[int, dict[int, set[int]]],
    *,
    exclude_request_id: int | None = None,
    with_usage: bool = True,
) -> dict[int, _ClusterPlan]:
    """The plans of the clusters, ``wanted`` naming per cluster id the resources in question
    and, per resource id, the namespaces (ids) in question, in a fixed number of reads however
    many clusters (the clusters with their capacities, the scheduled grants, the allocations
    in question, the others summed), and with ``with_usage`` one read per cluster of the usage
    rollups that only feed warnings. What is read grows with the namespaces in question, not
    with the cluster: the other namespaces' allocations arrive summed."""
    if not wanted:
        return {}
    clusters, capacities_of = plan_capacities(wanted)
    # The MIG layout rule counts every MIG profile cut from the same cards as a touched one.
    read = {
        pk: set(by_resource) | _same_cards(clusters[pk], capacities_of[pk], set(by_resource))
        for pk, by_resource in wanted.items()
    }
    resource_ids = {r for ids in read.values() for r in ids}
    # Namespaces read one by one: those in question, and those grants hold guarantee in (the
    # held amount lands on the allocation with its priority classes).
    grant_lines = [
        line
        for line in holding_lines(cluster_ids=clusters, exclude_request_id=exclude_request_id)
        if line.resource_id in read[line.cluster_id]
    ]
    namespace_ids = {
        pk for by_resource in wanted.values() for ids in by_resource.values() for pk in ids
    }
    namespace_ids |= {line.namespace_id for line in grant_lines}
    allocations: dict[int, dict[tuple[str, str], AllocationFacts]] = defaultdict(dict)
    others: dict[int, list[AllocationFacts]] = defaultdict(list)
    for cluster_id, resource_id, facts, summed in allocation_facts_of(
        wanted, resource_ids, namespace_ids
    ):
        if resource_id not in read[cluster_id]:
            continue
        if summed:
            others[cluster_id].append(facts)
        else:
            allocations[cluster_id][(facts.namespace, facts.resource)] = facts
    _with_grants(clusters, grant_lines, allocations)
    plans = {}
    top_classes = (
        top_priority_classes()
        if any(c.effective_top_priority_share is not None for c in clusters.values())
        else frozenset()
    )
    for cluster_id in sorted(wanted):
        cluster = clusters[cluster_id]
        asked = {pk for ids in wanted[cluster_id].values() for pk in ids}
        plans[cluster_id] = _ClusterPlan(
            facts=cluster_facts(cluster, capacities_of[cluster_id], top_classes=top_classes),
            allocations=allocations[cluster_id],
            others=tuple(others[cluster_id]),
            usage=tuple(
                typical_daily_peaks(
                    cluster=cluster, today=timezone.localdate(), namespace_ids=asked
                )
            )
            if with_usage
            else (),
        )
    return plans


def _wanted(lines: Iterable[RequestLine]) -> dict[int, dict[int, set[int]]]:
    """What _load_plans reads for these lines: per cluster id, per resource id, the namespaces."""
    wanted: dict[int, dict[int, set[int]]] = defaultdict(lambda: defaultdict(set))
    for line in lines:
        wanted[line.team_namespace.cluster_id][line.resource_id].add(line.team_namespace_id)
    return wanted


def _same_cards(cluster: Cluster, capacities: list[ClusterCapacity], ids) -> set[int]:
    """The MIG resources of the cluster cut from the same card models as those of ``ids``."""
    if not cluster.gpu_cards:
        return set()
    mig = mig_resources_of(cluster.gpu_cards, [c.resource for c in capacities])
    models = {
        mig[c.resource.name][0]
        for c in capacities
        if c.resource_id in ids and c.resource.name in mig
    }
    return {
        c.resource_id
        for c in capacities
        if c.resource.name in mig and mig[c.resource.name][0] in models
    }


def _check(
    plan: _ClusterPlan,
    lines: list[RequestLine],
    *,
    final: bool,
    overlay: dict[tuple[str, str], AllocationFacts] | None = None,
) -> list[Finding]:
    allocations = dict(plan.allocations)
    allocations.update(overlay or {})
    changes = []
    for line in lines:
        guarantee = line.final_guarantee if final else line.requested_guarantee
        cap = line.final_cap if final else line.requested_cap
        per_pod = line.final_per_pod_max if final else line.requested_per_pod_max
        classes = line.final_priority_classes if final else line.requested_priority_classes
        changes.append(
            PlanChange(
                cluster=plan.facts.name,
                namespace=line.team_namespace.name,
                resource=line.resource.name,
                guarantee=Decimal(guarantee),
                cap=Decimal(cap),
                per_pod_max=per_pod,
                current=allocations.get((line.team_namespace.name, line.resource.name)),
                priority_classes=frozenset(classes or ()),
            )
        )
    return check_change(
        cluster=plan.facts,
        allocations=list(allocations.values()),
        changes=changes,
        usage=plan.usage,
        others=plan.others,
    )


def _by_cluster(lines: Iterable[RequestLine]) -> dict[int, list[RequestLine]]:
    by_cluster: dict[int, list[RequestLine]] = defaultdict(list)
    for line in lines:
        by_cluster[line.team_namespace.cluster_id].append(line)
    return by_cluster


# --- the team's ceiling over every cluster ------------------------------------------------------


def _ceiling_findings(
    plans: dict[int, _ClusterPlan],
    lines: list[RequestLine],
    *,
    final: bool,
    exclude_request_id: int | None = None,
    tree: TeamTree | None = None,
    promised: dict[int, Fraction] | None = None,
    gpus: dict[int, TeamGpus] | None = None,
    assuming: Iterable[RequestLine] = (),
) -> list[Finding]:
    """Findings of the ceilings of the lines' teams and the teams above them (nothing more is
    read when no team in question has one). ``promised`` (held_caps()) and ``gpus``
    (team_gpus()) may be read already."""
    tree = tree or TeamTree.read()
    chains = {line.team_namespace.team_id: [] for line in lines}
    for team_id in chains:
        chains[team_id] = tree.chain(team_id)
    with_ceiling = {pk for chain in chains.values() for pk in chain if pk in tree.ceilings}
    if not with_ceiling:
        return []
    held = dict(held_caps(exclude_request_id) if promised is None else promised)
    # Lines taken as applied first (another request of a batch) count as allocations.
    for line in assuming:
        base = plans[line.team_namespace.cluster_id].allocations.get(
            (line.team_namespace.name, line.resource.name)
        )
        per_unit = gpus_of(line)
        if per_unit is not None:
            added = Fraction(line.final_cap) - Fraction(base.cap if base else 0)
            held[line.team_namespace.team_id] = held.get(line.team_namespace.team_id, 0) + (
                added * per_unit
            )
    ceilings = ceiling_totals(tree, with_ceiling, held=held, gpus=gpus)
    changes = []
    for line in lines:
        plan = plans[line.team_namespace.cluster_id]
        current = plan.allocations.get((line.team_namespace.name, line.resource.name))
        changes.append(
            CeilingChange(
                cluster=plan.facts.name,
                namespace=line.team_namespace.name,
                resource=line.resource.name,
                teams=frozenset(tree.slugs[pk] for pk in chains[line.team_namespace.team_id]),
                gpus_per_unit=gpus_of(line),
                cap_before=current.cap if current is not None else Decimal(0),
                cap_after=Decimal(line.final_cap if final else line.requested_cap),
            )
        )
    return check_ceilings(ceilings=ceilings.values(), changes=changes)


def validate_lines(
    lines: list[RequestLine], *, final: bool, exclude_request_id: int | None = None
) -> list[Finding]:
    """Findings for the request's lines: requested values, or the decided ones when final."""
    by_cluster = _by_cluster(lines)
    plans = _load_plans(_wanted(lines), exclude_request_id=exclude_request_id)
    findings: list[Finding] = []
    for cluster_id, cluster_lines in sorted(by_cluster.items()):
        findings += _check(plans[cluster_id], cluster_lines, final=final)
    findings += _ceiling_findings(plans, lines, final=final, exclude_request_id=exclude_request_id)
    return findings


def requests_fit_problems(
    requests: Iterable[QuotaRequest],
    *,
    assuming: Iterable[RequestLine] = (),
    lines_of: dict[int, list[RequestLine]] | None = None,
) -> dict[int, list[Finding]]:
    """Does each request, with its decided (or requested) values, fit the plan now?

    The one answer the admin queue, the request page, the API and auto-approval ask: per
    request id, the errors approving it would meet (empty: it fits). ``assuming`` are lines
    of another request taken as applied first. ``lines_of``: the requests' lines (with their
    namespaces and resources) as the caller read them already (the request list), else they
    are read here. Reads each cluster once for all requests.
    """
    requests = list(requests)
    if lines_of is None:
        lines_of = {r.pk: [] for r in requests}
        for line in (
            RequestLine.objects.filter(request_id__any_of=list(lines_of))
            .select_related("team_namespace", "resource")
            .order_by("id")
            if lines_of
            else ()
        ):
            lines_of[line.request_id].append(line)
    assuming = list(assuming)
    wanted = _wanted([*assuming, *(line for ls in lines_of.values() for line in ls)])
    # Whether a request fits is a matter of errors; warnings (usage) are not read here.
    plans = _load_plans(wanted, with_usage=False)
    overlay: dict[int, dict[tuple[str, str], AllocationFacts]] = defaultdict(dict)
    for line in assuming:
        cluster_id = line.team_namespace.cluster_id
        key = (line.team_namespace.name, line.resource.name)
        base = plans[cluster_id].allocations.get(key)
        overlay[cluster_id][key] = AllocationFacts(
            cluster=plans[cluster_id].facts.name,
            namespace=key[0],
            resource=key[1],
            guarantee=line.final_guarantee,
            cap=line.final_cap,
            per_pod_max=line.final_per_pod_max,
            workload_class=base.workload_class if base else line.team_namespace.workload_class,
            held=base.held if base else Decimal(0),
            priority_classes=frozenset(line.final_priority_classes or ()),
        )
    tree = TeamTree.read()
    promised = held_caps() if tree.ceilings else {}
    gpus = team_gpus() if tree.ceilings else {}
    problems = {}
    for request in requests:
        errors: list[Finding] = []
        for cluster_id, cluster_lines in sorted(_by_cluster(lines_of[request.pk]).items()):
            found = _check(
                plans[cluster_id], cluster_lines, final=True, overlay=overlay.get(cluster_id)
            )
            errors += [f for f in found if f.is_error]
        if lines_of[request.pk]:
            found = _ceiling_findings(
                plans,
                lines_of[request.pk],
                final=True,
                tree=tree,
                promised=promised,
                gpus=gpus,
                assuming=assuming,
            )
            errors += [f for f in found if f.is_error]
        problems[request.pk] = errors
    return problems


def findings_json(findings: list[Finding]) -> list[dict]:
    """Findings as JSON, with ``message`` in the active language (answers, errors)."""
    return [
        {
            "level": f.level,
            "rule": f.rule,
            "field": f.field,
            "message": f.message,
            "cluster": f.cluster,
            "namespace": f.namespace,
            "resource": f.resource,
        }
        for f in findings
    ]


def stored_findings(findings: list[Finding]) -> list[dict]:
    """Findings as a request stores them: ``message`` in English, and ``text`` (msgid and
    parameters) to show them in the reader's language later (:func:`localized_findings`)."""
    stored = findings_json(findings)
    for row, finding in zip(stored, findings, strict=True):
        if finding.text is not None:
            row["message"] = finding.text.english()
            row["text"] = finding.text.to_json()
    return stored


def localized_findings(stored: Iterable[dict]) -> list[dict]:
    """Stored findings as :func:`findings_json` gives them: ``message`` in the active language
    (rendered again from ``text``; a finding stored without one as it was stored)."""
    return localized_messages(stored)
