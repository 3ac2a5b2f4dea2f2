"""Rendering of cluster plans into Kubernetes objects: pure, no database."""

import copy

import pytest
import yaml

from kubesandbox.schemas import validate_object
from quotas.kube.objects import ObjectKey
from quotas.kube.plan import (
    ClusterPlan,
)
from quotas.kube.render import (
    CLUSTER_LABEL,
    GENERATION_ANNOTATION,
    MANAGED_BY_LABEL,
    TEAM_LABEL,
    WORKLOAD_LABEL,
    flavor_name,
    quantity,
    render_cluster,
    render_kueue_objects,
    render_limit_range,
    render_namespace,
    render_priority_classes,
    render_resource_quotas,
    render_volcano_queues,
    render_yunikorn_configmap,
    volcano_weight,
)
from tests.support.plans import (
    ALL_BACKENDS,
    CPU,
    GPU,
    GPUCORES,
    GPUMEM,
    H100,
    MEMORY,
    MIG_1G,
    PRIORITY_CLASSES,
    D,
    alloc,
    find,
    hierarchy_plan,
    kinds,
    mig_plan,
    ns,
    seed_plan,
    team,
)


def yunikorn_config(plan: ClusterPlan) -> dict:
    return yaml.safe_load(render_yunikorn_configmap(plan)["data"]["queues.yaml"])


def yunikorn_queue(config: dict, *path: str) -> dict:
    node = config["partitions"][0]["queues"][0]
    assert node["name"] == "root"
    for name in path:
        node = next(q for q in node.get("queues", ()) if q["name"] == name)
    return node


# --------------------------------------------------------------------------------------------
# Strict schema validation of everything rendered


@pytest.mark.parametrize("make_plan", [seed_plan, mig_plan, hierarchy_plan])
def test_every_rendered_object_validates_strictly(make_plan):
    objects = render_cluster(make_plan())
    assert {"Namespace", "ResourceQuota", "Queue", "ClusterQueue", "ConfigMap"} <= set(
        kinds(objects)
    )
    for obj in objects:
        assert validate_object(obj) == [], obj


def test_mixed_resources_validate_strictly():
    plan = ClusterPlan(
        name="mixed",
        backends=ALL_BACKENDS,
        namespaces=(
            ns(
                "team-x-training",
                team("team-x"),
                "training",
                alloc(GPU, 2, 4, 2, ("training",)),
                alloc(H100, 0, 2),
                alloc(GPUMEM, "10240", "20480", "8192"),
                alloc(GPUCORES, 50, 100),
                alloc(CPU, "0.5", "16", "8", ("training",)),
                alloc(MEMORY, "1.5", "64", "32"),
            ),
        ),
    )
    objects = render_cluster(plan)
    for obj in objects:
        assert validate_object(obj) == [], obj


def test_a_broken_object_fails_validation():
    """The validation above can fail: an unknown field or a bad quantity is reported."""
    quota = find(render_cluster(seed_plan()), "ResourceQuota", "gpu-quota", "team-a-training")
    broken = copy.deepcopy(quota)
    broken["spec"]["hardd"] = {"requests.nvidia.com/gpu": "10"}
    assert [e.field for e in validate_object(broken)] == ["spec.hardd"]
    bad_quantity = copy.deepcopy(quota)
    bad_quantity["spec"]["hard"]["requests.nvidia.com/gpu"] = "ten"
    assert validate_object(bad_quantity)
    queue = find(render_cluster(seed_plan()), "Queue", "team-a-training")
    queue = copy.deepcopy(queue)
    queue["spec"]["weight"] = 0
    assert validate_object(queue)


# --------------------------------------------------------------------------------------------
# Values


def test_resource_quota_has_the_caps_on_requests():
    objects = render_cluster(seed_plan())
    for name, cap in [("team-a-training", "10"), ("team-b-inference", "6"), ("team-c-dev", "4")]:
        quota = find(objects, "ResourceQuota", "gpu-quota", name)
        assert quota["spec"] == {"hard": {"requests.nvidia.com/gpu": cap}}


def test_hami_resources_are_quota_d_on_limits_and_cpu_memory_on_requests_with_suffix():
    namespace = ns(
        "team-x-dev",
        team("team-x"),
        "dev",
        alloc(GPUMEM, 1024, 4096),
        alloc(GPUCORES, 30, 100),
        alloc(CPU, 4, 8),
        alloc(MEMORY, 16, 64),
        alloc(MIG_1G, 1, 2),
    )
    plan = ClusterPlan(name="c", backends=frozenset({"core"}), namespaces=(namespace,))
    (quota,) = render_resource_quotas(plan, namespace)
    assert quota["spec"]["hard"] == {
        "limits.nvidia.com/gpumem": "4096",
        "limits.nvidia.com/gpucores": "100",
        "requests.cpu": "8",
        "requests.memory": "64Gi",
        "requests.nvidia.com/mig-1g.10gb": "2",
    }


def test_a_cpu_memory_quota_comes_with_default_requests_and_nothing_else():
    """The API server refuses containers without cpu/memory requests under such a quota: the
    LimitRange defaults them (requests only, only the quota'd resources, never GPUs)."""
    both = ns(
        "team-x-dev",
        team("team-x"),
        "dev",
        alloc(GPU, 1, 4),
        alloc(CPU, 2, 8),
        alloc(MEMORY, 4, 16),
    )
    plan = ClusterPlan(name="c", backends=frozenset({"core"}), namespaces=(both,))
    objects = render_namespace(plan, both)
    limit_range = find(objects, "LimitRange", "default-requests", "team-x-dev")
    assert limit_range == render_limit_range(plan, both)
    assert validate_object(limit_range) == []
    assert limit_range["spec"] == {
        "limits": [{"type": "Container", "defaultRequest": {"cpu": "100m", "memory": "128Mi"}}]
    }
    assert limit_range["metadata"]["labels"][TEAM_LABEL] == "team-x"
    # Before the quotas that demand the requests.
    keys = [ObjectKey.of(o)[1] for o in objects]
    assert keys.index("LimitRange") < keys.index("ResourceQuota")
    assert find(render_cluster(plan), "LimitRange", "default-requests", "team-x-dev") == limit_range

    cpu_only = ns("team-y-dev", team("team-y"), "dev", alloc(CPU, "0.05", "0.05"))
    plan = ClusterPlan(name="c", backends=frozenset({"core"}), namespaces=(cpu_only,))
    # Only cpu, and never more than the namespace may have.
    assert render_limit_range(plan, cpu_only)["spec"]["limits"][0]["defaultRequest"] == {
        "cpu": "50m"
    }
    small_max = ns("team-z-dev", team("team-z"), "dev", alloc(MEMORY, 1, 8, "0.0625"))
    plan = ClusterPlan(name="c", backends=frozenset({"core"}), namespaces=(small_max,))
    defaults = render_limit_range(plan, small_max)["spec"]["limits"][0]["defaultRequest"]
    assert defaults == {"memory": "64Mi"}


@pytest.mark.parametrize("make_plan", [seed_plan, mig_plan, hierarchy_plan])
def test_gpu_only_namespaces_get_no_limit_range(make_plan):
    plan = make_plan()
    assert "LimitRange" not in kinds(render_cluster(plan))
    hami = ns("team-h-dev", team("team-h"), "dev", alloc(GPUMEM, 1024, 4096), alloc(GPUCORES, 1, 2))
    assert render_limit_range(plan, hami) is None


def test_priority_classes_give_a_second_quota_with_zero_for_other_classes():
    objects = render_cluster(seed_plan())
    other = find(objects, "ResourceQuota", "gpu-quota-other-classes", "team-a-training")
    assert other["spec"] == {
        "hard": {"requests.nvidia.com/gpu": "0"},
        "scopeSelector": {
            "matchExpressions": [
                {
                    "scopeName": "PriorityClass",
                    "operator": "NotIn",
                    "values": ["experiment", "training"],
                }
            ]
        },
    }
    inference = find(objects, "ResourceQuota", "gpu-quota-other-classes", "team-b-inference")
    expressions = inference["spec"]["scopeSelector"]["matchExpressions"]
    assert expressions[0]["values"] == ["production-inference"]


def test_no_priority_classes_no_scoped_quota_and_only_restricted_resources_get_zero():
    namespace = ns(
        "team-x-dev",
        team("team-x"),
        "dev",
        alloc(GPU, 1, 2, classes=("experiment",)),
        alloc(CPU, 4, 8),
    )
    plan = ClusterPlan(name="c", backends=frozenset({"core"}), namespaces=(namespace,))
    quotas = render_resource_quotas(plan, namespace)
    assert [q["metadata"]["name"] for q in quotas] == ["gpu-quota", "gpu-quota-other-classes"]
    assert quotas[1]["spec"]["hard"] == {"requests.nvidia.com/gpu": "0"}

    free = ns("team-y-dev", team("team-y"), "dev", alloc(GPU, 1, 2))
    assert [q["metadata"]["name"] for q in render_resource_quotas(plan, free)] == ["gpu-quota"]


def test_different_class_sets_get_separate_scoped_quotas():
    namespace = ns(
        "team-x-dev",
        team("team-x"),
        "dev",
        alloc(GPU, 1, 2, classes=("training",)),
        alloc(MIG_1G, 1, 2, classes=("experiment",)),
    )
    plan = ClusterPlan(name="c", backends=frozenset({"core"}), namespaces=(namespace,))
    quotas = render_resource_quotas(plan, namespace)
    scoped = {
        q["metadata"]["name"]: (
            q["spec"]["hard"],
            q["spec"]["scopeSelector"]["matchExpressions"][0]["values"],
        )
        for q in quotas[1:]
    }
    assert scoped == {
        "gpu-quota-other-classes": ({"requests.nvidia.com/mig-1g.10gb": "0"}, ["experiment"]),
        "gpu-quota-other-classes-2": ({"requests.nvidia.com/gpu": "0"}, ["training"]),
    }
    for quota in quotas:
        assert validate_object(quota) == []


def test_namespace_without_allocations_gets_no_quota_and_no_queues():
    plan = ClusterPlan(
        name="c",
        backends=ALL_BACKENDS,
        namespaces=(ns("team-x-dev", team("team-x"), "dev"),),
    )
    objects = render_cluster(plan)
    assert [ObjectKey.of(o) for o in objects] == [
        ("v1", "Namespace", "", "team-x-dev"),
        ("v1", "ConfigMap", "yunikorn", "yunikorn-configs"),
    ]
    assert yunikorn_config(plan)["partitions"][0]["queues"][0]["queues"] == [{"name": "default"}]


def test_volcano_queues_map_guarantee_and_cap():
    objects = render_cluster(seed_plan())
    a = find(objects, "Queue", "team-a-training")["spec"]
    assert a["deserved"] == {"nvidia.com/gpu": "6"}
    assert a["capability"] == {"nvidia.com/gpu": "10"}
    assert a["reclaimable"] is True
    assert a["weight"] == 6
    assert a["parent"] == "root"
    assert "guarantee" not in a  # training lends its idle guarantee
    b = find(objects, "Queue", "team-b-inference")["spec"]
    assert b["guarantee"] == {"resource": {"nvidia.com/gpu": "4"}}  # inference never lends
    assert b["deserved"] == {"nvidia.com/gpu": "4"}
    c = find(objects, "Queue", "team-c-dev")["spec"]
    assert (c["deserved"], c["capability"], c["weight"]) == (
        {"nvidia.com/gpu": "2"},
        {"nvidia.com/gpu": "4"},
        2,
    )


def test_volcano_capability_ge_deserved_ge_guarantee_everywhere():
    for plan in (seed_plan(), mig_plan(), hierarchy_plan()):
        for queue in render_volcano_queues(plan):
            spec = queue["spec"]
            guarantee = spec.get("guarantee", {}).get("resource", {})
            for resource, deserved in spec["deserved"].items():
                assert D(spec["capability"][resource]) >= D(deserved)
                assert D(deserved) >= D(guarantee.get(resource, "0"))


def test_volcano_weight_rule():
    assert volcano_weight([]) == 1
    assert volcano_weight([alloc(GPU, 0, 4)]) == 1
    assert volcano_weight([alloc(GPU, 6, 10), alloc(MIG_1G, "2.5", 4)]) == 9
    assert volcano_weight([alloc(CPU, 64, 128), alloc(GPUMEM, 4096, 8192)]) == 1


def test_kueue_quota_sums_to_cap_and_selects_exactly_its_namespace():
    objects = render_cluster(seed_plan())
    for namespace in seed_plan().namespaces:
        cq = find(objects, "ClusterQueue", namespace.name)["spec"]
        assert cq["cohortName"] == "portal"
        assert cq["namespaceSelector"] == {
            "matchLabels": {"kubernetes.io/metadata.name": namespace.name}
        }
        group, base = cq["resourceGroups"]
        assert group["coveredResources"] == ["nvidia.com/gpu"]
        assert base["coveredResources"] == ["cpu", "memory"]
        (flavor,) = group["flavors"]
        assert flavor["name"] == "a100-80gb"
        (resource,) = flavor["resources"]
        (a,) = namespace.allocations
        assert D(resource["nominalQuota"]) == a.guarantee
        assert D(resource["nominalQuota"]) + D(resource["borrowingLimit"]) == a.cap
        local = find(objects, "LocalQueue", "default", namespace.name)
        assert local["spec"] == {"clusterQueue": namespace.name}
    team_a = find(objects, "ClusterQueue", "team-a-training")["spec"]
    resource = team_a["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert resource == {"name": "nvidia.com/gpu", "nominalQuota": "6", "borrowingLimit": "4"}
    inference = find(objects, "ClusterQueue", "team-b-inference")["spec"]
    assert inference["resourceGroups"][0]["flavors"][0]["resources"][0]["lendingLimit"] == "0"


def test_kueue_borrowing_limit_is_stated_even_when_zero():
    plan = ClusterPlan(
        name="c",
        backends=frozenset({"core", "kueue"}),
        namespaces=(ns("team-x-dev", team("team-x"), "dev", alloc(GPU, 3, 3)),),
    )
    cq = find(render_kueue_objects(plan), "ClusterQueue", "team-x-dev")
    resource = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert resource["borrowingLimit"] == "0"


def test_kueue_one_resource_group_per_flavor():
    plan = ClusterPlan(
        name="c",
        backends=frozenset({"core", "kueue"}),
        namespaces=(
            ns(
                "team-x-dev",
                team("team-x"),
                "dev",
                alloc(GPU, 1, 2),
                alloc(MIG_1G, 2, 4),
                alloc(H100, 1, 1),
                alloc(CPU, 4, 8),
                alloc(MEMORY, 16, 32),
            ),
        ),
    )
    objects = render_kueue_objects(plan)
    flavors = [o["metadata"]["name"] for o in objects if o["kind"] == "ResourceFlavor"]
    assert flavors == ["a100-80gb", "default-flavor", "h100-sxm"]
    groups = find(objects, "ClusterQueue", "team-x-dev")["spec"]["resourceGroups"]
    assert [(g["flavors"][0]["name"], g["coveredResources"]) for g in groups] == [
        ("a100-80gb", ["nvidia.com/gpu", "nvidia.com/mig-1g.10gb"]),
        ("default-flavor", ["cpu", "memory"]),
        ("h100-sxm", ["nvidia.com/gpu-h100"]),
    ]
    for group in groups:
        for flavor in group["flavors"]:
            assert [r["name"] for r in flavor["resources"]] == group["coveredResources"]
    memory = groups[1]["flavors"][0]["resources"][1]
    assert memory == {"name": "memory", "nominalQuota": "16Gi", "borrowingLimit": "16Gi"}
    for obj in objects:
        assert validate_object(obj) == []


def test_flavor_names():
    assert flavor_name("A100 80GB") == "a100-80gb"
    assert flavor_name("  H100 SXM5 (94GB) ") == "h100-sxm5-94gb"
    assert flavor_name("") == "default-flavor"


def test_mig_plan_values():
    plan = mig_plan()
    objects = render_cluster(plan)
    quota = find(objects, "ResourceQuota", "gpu-quota", "team-b-dev")
    assert quota["spec"]["hard"] == {"requests.nvidia.com/mig-1g.10gb": "6"}
    cq = find(objects, "ClusterQueue", "team-a-inference")["spec"]
    resource = cq["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert resource == {
        "name": "nvidia.com/mig-3g.40gb",
        "nominalQuota": "1",
        "borrowingLimit": "1",
        "lendingLimit": "0",
    }
    config = yunikorn_config(plan)
    assert yunikorn_queue(config, "team-c-dev")["resources"] == {
        "guaranteed": {"nvidia.com/mig-1g.10gb": "2"},
        "max": {"nvidia.com/mig-1g.10gb": "4"},
    }


def test_yunikorn_queues_yaml():
    plan = seed_plan()
    configmap = render_yunikorn_configmap(plan)
    assert configmap["metadata"] == {
        "name": "yunikorn-configs",
        "namespace": "yunikorn",
        "labels": {MANAGED_BY_LABEL: "gpu-quota-portal", CLUSTER_LABEL: plan.name},
    }
    config = yaml.safe_load(configmap["data"]["queues.yaml"])
    (partition,) = config["partitions"]
    assert partition["name"] == "default"
    assert partition["placementrules"] == [
        {"name": "tag", "value": "namespace", "create": False},
        {"name": "fixed", "value": "root.default", "create": False},
    ]
    root = yunikorn_queue(config)
    assert root["submitacl"] == "*"
    assert [q["name"] for q in root["queues"]] == [
        "default",
        "team-a-training",
        "team-b-inference",
        "team-c-dev",
    ]
    a = yunikorn_queue(config, "team-a-training")["resources"]
    assert a == {"guaranteed": {"nvidia.com/gpu": "6"}, "max": {"nvidia.com/gpu": "10"}}
    assert "resources" not in root  # YuniKorn refuses limits on root


def test_yunikorn_keys_for_cpu_and_memory_are_whole_numbers():
    plan = ClusterPlan(
        name="c",
        backends=frozenset({"core", "yunikorn"}),
        yunikorn_namespace="yk",
        namespaces=(
            ns(
                "team-x-dev",
                team("team-x"),
                "dev",
                alloc(CPU, "0.5", 8),
                alloc(MEMORY, "1.5", 64),
            ),
        ),
    )
    configmap = render_yunikorn_configmap(plan)
    assert configmap["metadata"]["namespace"] == "yk"
    resources = yunikorn_queue(yunikorn_config(plan), "team-x-dev")["resources"]
    assert resources == {
        "guaranteed": {"vcore": "500m", "memory": "1536Mi"},
        "max": {"vcore": "8", "memory": "64Gi"},
    }


def test_priority_classes():
    plan = seed_plan()
    objects = {o["metadata"]["name"]: o for o in render_priority_classes(plan)}
    assert objects["production-inference"] == {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {
            "name": "production-inference",
            "labels": {MANAGED_BY_LABEL: "gpu-quota-portal", CLUSTER_LABEL: plan.name},
        },
        "value": 100000,
        "preemptionPolicy": "PreemptLowerPriority",
        "description": "Online inference.",
    }
    assert objects["experiment"]["preemptionPolicy"] == "Never"
    # Never the cluster's default class (left out: the API server drops a false globalDefault).
    assert not any(o.get("globalDefault") for o in objects.values())


# --------------------------------------------------------------------------------------------
# Department hierarchy


def test_volcano_department_queues_carry_sums_and_parents():
    objects = render_cluster(hierarchy_plan())
    research = find(objects, "Queue", "research")
    ml = find(objects, "Queue", "ml")
    assert research["spec"]["parent"] == "root"
    assert ml["spec"]["parent"] == "research"
    assert ml["metadata"]["labels"][TEAM_LABEL] == "ml"
    assert ml["spec"]["capability"] == {"nvidia.com/gpu": "16"}
    assert ml["spec"]["deserved"] == {"nvidia.com/gpu": "10"}
    # No guarantee on parents: the proportion plugin would count the child's again per level
    # (the webhook holds the children's guarantee to the parent's capability instead).
    assert "guarantee" not in ml["spec"] and "guarantee" not in research["spec"]
    assert research["spec"]["capability"] == {"nvidia.com/gpu": "18"}
    assert research["spec"]["deserved"] == {"nvidia.com/gpu": "11"}
    assert research["spec"]["weight"] == 11
    assert find(objects, "Queue", "team-a-training")["spec"]["parent"] == "ml"
    assert find(objects, "Queue", "team-d-dev")["spec"]["parent"] == "research"
    assert find(objects, "Queue", "team-c-dev")["spec"]["parent"] == "root"


def test_volcano_children_fit_their_parents():
    queues = {q["metadata"]["name"]: q["spec"] for q in render_volcano_queues(hierarchy_plan())}
    for name, spec in queues.items():
        children = [s for s in queues.values() if s["parent"] == name]
        for resource in spec["deserved"]:
            assert sum(D(c["deserved"].get(resource, 0)) for c in children) <= D(
                spec["deserved"][resource]
            )
            for child in children:
                assert D(child["capability"][resource]) <= D(spec["capability"][resource])


def test_kueue_cohort_chain():
    objects = render_cluster(hierarchy_plan())
    cohorts = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "Cohort"}
    assert "parentName" not in cohorts.pop("portal")
    # Department cohorts carry no quota: the caps are per ClusterQueue.
    assert cohorts == {
        "research": {"parentName": "portal"},
        "ml": {"parentName": "research"},
    }
    assert find(objects, "ClusterQueue", "team-a-training")["spec"]["cohortName"] == "ml"
    assert find(objects, "ClusterQueue", "team-d-dev")["spec"]["cohortName"] == "research"
    assert find(objects, "ClusterQueue", "team-c-dev")["spec"]["cohortName"] == "portal"


def test_kueue_cohort_name_comes_from_the_plan():
    plan = ClusterPlan(
        name="c",
        backends=frozenset({"core", "kueue"}),
        kueue_cohort="gpu-pool",
        namespaces=hierarchy_plan().namespaces,
    )
    objects = render_kueue_objects(plan)
    assert find(objects, "Cohort", "research")["spec"] == {"parentName": "gpu-pool"}
    assert find(objects, "ClusterQueue", "team-c-dev")["spec"]["cohortName"] == "gpu-pool"


def test_yunikorn_nested_queues_and_placement():
    config = yunikorn_config(hierarchy_plan())
    research = yunikorn_queue(config, "research")
    assert [q["name"] for q in research["queues"]] == ["ml", "team-d-dev"]
    assert research["resources"] == {
        "guaranteed": {"nvidia.com/gpu": "11"},
        "max": {"nvidia.com/gpu": "18"},
    }
    leaf = yunikorn_queue(config, "research", "ml", "team-b-inference")
    assert leaf["resources"] == {
        "guaranteed": {"nvidia.com/gpu": "4"},
        "max": {"nvidia.com/gpu": "6"},
    }
    assert [q["name"] for q in yunikorn_queue(config).get("queues")] == [
        "default",
        "research",
        "team-c-dev",
    ]
    rules = config["partitions"][0]["placementrules"]
    assert rules == [
        {
            "name": "tag",
            "value": "namespace",
            "create": False,
            "parent": {"name": "fixed", "value": "root.research"},
        },
        {
            "name": "tag",
            "value": "namespace",
            "create": False,
            "parent": {"name": "fixed", "value": "root.research.ml"},
        },
        {"name": "tag", "value": "namespace", "create": False},
        {"name": "fixed", "value": "root.default", "create": False},
    ]


def test_department_named_like_a_namespace_is_refused():
    plan = ClusterPlan(
        name="c",
        backends=frozenset({"core", "volcano"}),
        namespaces=(
            ns("team-a-training", team("team-a", "team-b-dev"), "training", alloc(GPU, 1, 2)),
            ns("team-b-dev", team("team-b"), "dev", alloc(GPU, 1, 2)),
        ),
    )
    with pytest.raises(ValueError, match="team-b-dev"):
        render_cluster(plan)


# --------------------------------------------------------------------------------------------
# Labels, ordering, determinism, backends


@pytest.mark.parametrize("make_plan", [seed_plan, mig_plan, hierarchy_plan])
def test_labels(make_plan):
    plan = make_plan()
    team_of = {n.name: n.team.slug for n in plan.namespaces}
    for obj in render_cluster(plan):
        labels = obj["metadata"]["labels"]
        assert labels[MANAGED_BY_LABEL] == plan.managed_by
        assert GENERATION_ANNOTATION not in obj["metadata"].get("annotations", {})
        namespace = obj["metadata"].get("namespace")
        if obj["kind"] == "Namespace":
            name = obj["metadata"]["name"]
            assert labels[TEAM_LABEL] == team_of[name]
            assert labels[WORKLOAD_LABEL] in ("training", "inference", "dev")
        elif namespace in team_of:
            assert labels[TEAM_LABEL] == team_of[namespace]
        elif obj["kind"] in ("Queue", "ClusterQueue") and obj["metadata"]["name"] in team_of:
            assert labels[TEAM_LABEL] == team_of[obj["metadata"]["name"]]
        elif obj["kind"] in ("PriorityClass", "ResourceFlavor", "ConfigMap"):
            assert TEAM_LABEL not in labels


def test_managed_by_comes_from_the_plan():
    plan = ClusterPlan(
        name="c",
        backends=ALL_BACKENDS,
        managed_by="other-portal",
        namespaces=seed_plan().namespaces,
        priority_classes=PRIORITY_CLASSES,
    )
    for obj in render_cluster(plan):
        assert obj["metadata"]["labels"][MANAGED_BY_LABEL] == "other-portal"


def test_apply_order():
    objects = render_cluster(hierarchy_plan())
    order = kinds(objects)
    namespaces = [i for i, k in enumerate(order) if k == "Namespace"]
    assert namespaces == list(range(len(namespaces)))
    rank = {
        "Namespace": 0,
        "PriorityClass": 1,
        "ValidatingAdmissionPolicy": 1,
        "ValidatingAdmissionPolicyBinding": 1,
        "ResourceFlavor": 1,
        "Cohort": 1,
        "Queue": 1,
        "ClusterQueue": 1,
        "ResourceQuota": 2,
        "LocalQueue": 2,
        "ConfigMap": 2,
    }
    assert [rank[k] for k in order] == sorted(rank[k] for k in order)
    # Parents before children (Volcano queues, Kueue cohorts), cohorts before ClusterQueues.
    position = {(o["kind"], o["metadata"]["name"]): i for i, o in enumerate(objects)}
    for obj in objects:
        spec = obj.get("spec") or {}
        parent = spec.get("parent") if obj["kind"] == "Queue" else spec.get("parentName")
        if obj["kind"] in ("Queue", "Cohort") and parent and parent != "root":
            assert (
                position[(obj["kind"], parent)] < position[(obj["kind"], obj["metadata"]["name"])]
            )
        if obj["kind"] == "ClusterQueue":
            assert (
                position[("Cohort", spec["cohortName"])]
                < position[("ClusterQueue", obj["metadata"]["name"])]
            )
    assert order.index("ClusterQueue") < order.index("LocalQueue")


def test_namespaces_only_first_even_without_backends():
    objects = render_cluster(seed_plan(backends={"core"}))
    assert kinds(objects)[:3] == ["Namespace"] * 3
    assert "Namespace" not in kinds(objects)[3:]


def test_deterministic_and_independent_of_input_order():
    plan = hierarchy_plan()
    shuffled = ClusterPlan(
        name=plan.name,
        backends=plan.backends,
        namespaces=tuple(reversed(plan.namespaces)),
        priority_classes=tuple(reversed(PRIORITY_CLASSES)),
    )
    ordered = ClusterPlan(
        name=plan.name,
        backends=plan.backends,
        namespaces=plan.namespaces,
        priority_classes=PRIORITY_CLASSES,
    )
    first = render_cluster(ordered)
    assert render_cluster(ordered) == first
    assert render_cluster(shuffled) == first
    dump = yaml.safe_dump_all(first, sort_keys=False)
    assert yaml.safe_dump_all(render_cluster(shuffled), sort_keys=False) == dump


def test_plan_without_backends_renders_only_core_objects():
    objects = render_cluster(seed_plan(backends={"core"}))
    assert set(kinds(objects)) == {
        "Namespace",
        "PriorityClass",
        "ResourceQuota",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
    assert render_volcano_queues(seed_plan(backends={"core"})) == []
    assert render_kueue_objects(seed_plan(backends={"core"})) == []
    assert render_yunikorn_configmap(seed_plan(backends={"core"})) is None
    # An empty backends set (no "core" either) renders the same core objects.
    assert render_cluster(seed_plan(backends=set())) == objects


def test_each_backend_adds_only_its_own_kinds():
    core = set(kinds(render_cluster(seed_plan(backends={"core"}))))
    assert set(kinds(render_cluster(seed_plan(backends={"core", "volcano"})))) - core == {"Queue"}
    assert set(kinds(render_cluster(seed_plan(backends={"core", "kueue"})))) - core == {
        "ResourceFlavor",
        "Cohort",
        "ClusterQueue",
        "LocalQueue",
    }
    assert set(kinds(render_cluster(seed_plan(backends={"core", "yunikorn"})))) - core == {
        "ConfigMap"
    }


def test_shadow_namespaces_are_still_rendered():
    plan = ClusterPlan(
        name="c",
        backends=ALL_BACKENDS,
        namespaces=(ns("team-x-dev", team("team-x"), "dev", alloc(GPU, 1, 2), shadow=True),),
    )
    keys = {ObjectKey.of(o)[1:] for o in render_cluster(plan)}
    assert {
        ("Namespace", "", "team-x-dev"),
        ("ResourceQuota", "team-x-dev", "gpu-quota"),
        ("Queue", "", "team-x-dev"),
        ("ClusterQueue", "", "team-x-dev"),
        ("LocalQueue", "team-x-dev", "default"),
    } <= keys


def test_render_namespace_is_the_team_part_of_render_cluster():
    plan = hierarchy_plan()
    everything = {ObjectKey.of(o): o for o in render_cluster(plan)}
    for namespace in plan.namespaces:
        part = render_namespace(plan, namespace)
        assert part[0]["kind"] == "Namespace"
        for obj in part:
            assert everything[ObjectKey.of(obj)] == obj
        assert {o["kind"] for o in part} == {
            "Namespace",
            "ResourceQuota",
            "Queue",
            "ClusterQueue",
            "LocalQueue",
        }
    shared = {
        k for k, o in everything.items() if o["kind"] in ("PriorityClass", "Cohort", "ConfigMap")
    }
    for namespace in plan.namespaces:
        assert not shared & {ObjectKey.of(o) for o in render_namespace(plan, namespace)}


def test_object_key():
    objects = render_cluster(seed_plan())
    assert ObjectKey.of(find(objects, "Namespace", "team-c-dev")) == (
        "v1",
        "Namespace",
        "",
        "team-c-dev",
    )
    assert ObjectKey.of(find(objects, "LocalQueue", "default", "team-c-dev")) == (
        "kueue.x-k8s.io/v1beta2",
        "LocalQueue",
        "team-c-dev",
        "default",
    )
    keys = [ObjectKey.of(o) for o in objects]
    assert len(keys) == len(set(keys))


# --------------------------------------------------------------------------------------------
# Quantities


@pytest.mark.parametrize(
    ("amount", "suffix", "expected"),
    [
        ("6", "", "6"),
        ("6.000", "", "6"),
        ("600", "", "600"),
        ("0", "", "0"),
        ("0.500", "", "500m"),
        ("1.25", "", "1250m"),
        ("16", "Gi", "16Gi"),
        ("1.5", "Gi", "1536Mi"),
        ("0.5", "Ki", "512"),
        ("2.5", "G", "2500M"),
        ("0.0001", "", "100000n"),
    ],
)
def test_quantity(amount, suffix, expected):
    text = quantity(D(amount), suffix)
    assert text == expected
    probe = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "q", "namespace": "n"},
        "spec": {"hard": {"requests.cpu": text}},
    }
    assert validate_object(probe) == []


# --------------------------------------------------------------------------------------------
# YuniKorn: the catch-all placement rule


def _configured_queue(config: dict, path: str) -> dict | None:
    node = config["partitions"][0]["queues"][0]
    for name in path.split(".")[1:]:
        node = next((q for q in node.get("queues", ()) if q["name"] == name), None)
        if node is None:
            return None
    return node


@pytest.mark.parametrize("make_plan", [seed_plan, mig_plan, hierarchy_plan])
def test_yunikorn_placement_ends_with_a_catch_all_to_a_configured_leaf(make_plan):
    """Without it YuniKorn rejects pods of every namespace the portal does not manage; and
    its validator rejects the whole config if a create: false rule names a missing queue."""
    config = yunikorn_config(make_plan())
    rules = config["partitions"][0]["placementrules"]
    assert rules[-1] == {"name": "fixed", "value": "root.default", "create": False}
    assert "parent" not in rules[-1]  # a qualified fixed queue takes no parent rule
    catch_all = _configured_queue(config, "root.default")
    assert catch_all == {"name": "default"}  # a leaf, no limits
    for rule in rules:
        parent = rule.get("parent")
        if parent:  # fixed parents of the tag rule must be configured parent queues
            assert _configured_queue(config, parent["value"]).get("parent") is True


def test_yunikorn_namespace_named_default_is_refused():
    plan = ClusterPlan(
        name="c",
        backends=frozenset({"core", "yunikorn"}),
        namespaces=(ns("default", team("team-x"), "dev", alloc(GPU, 1, 2)),),
    )
    with pytest.raises(ValueError, match=r"root\.default"):
        render_cluster(plan)


# --------------------------------------------------------------------------------------------
# Kueue: cpu and memory covered, the unguaranteed capacity in the root Cohort


class KueueTree:
    """Kueue's quota arithmetic (kubernetes-sigs/kueue pkg/cache/scheduler/resource_node.go)
    over rendered Cohorts and ClusterQueues: what a queue could admit if the rest were idle."""

    def __init__(self, objects):
        self.parent: dict[str, str | None] = {}
        self.quotas: dict[str, dict[tuple[str, str], dict]] = {}
        self.children: dict[str, list[str]] = {}
        for obj in objects:
            if obj["kind"] not in ("Cohort", "ClusterQueue"):
                continue
            name = obj["kind"] + "/" + obj["metadata"]["name"]
            spec = obj["spec"]
            parent = spec.get("parentName") or spec.get("cohortName")
            self.parent[name] = f"Cohort/{parent}" if parent else None
            self.quotas[name] = {
                (flavor["name"], r["name"]): r
                for group in spec.get("resourceGroups", ())
                for flavor in group["flavors"]
                for r in flavor["resources"]
            }
        for name, parent in self.parent.items():
            if parent:
                assert parent in self.parent, f"{name} names a missing cohort {parent}"
                self.children.setdefault(parent, []).append(name)

    def _limit(self, node, fr, key):
        value = self.quotas[node].get(fr, {}).get(key)
        return None if value is None else D(quantity_value(value))

    def subtree(self, node, fr):
        own = self._limit(node, fr, "nominalQuota") or D(0)
        return own + sum(
            (self.subtree(c, fr) - self.local(c, fr) for c in self.children.get(node, ())), D(0)
        )

    def local(self, node, fr):
        lending = self._limit(node, fr, "lendingLimit")
        return D(0) if lending is None else max(D(0), self.subtree(node, fr) - lending)

    def potential(self, name, fr, kind="ClusterQueue"):
        node = f"{kind}/{name}"
        parent = self.parent[node]
        if parent is None:
            return self.subtree(node, fr)
        available = self.local(node, fr) + self.potential(parent.split("/", 1)[1], fr, "Cohort")
        borrowing = self._limit(node, fr, "borrowingLimit")
        if borrowing is not None:
            available = min(available, self.subtree(node, fr) + borrowing)
        return available


def quantity_value(text: str) -> D:
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
    units |= {"m": D("0.001"), "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
    for suffix, size in sorted(units.items(), key=lambda u: -len(u[0])):
        if text.endswith(suffix):
            return D(text[: -len(suffix)]) * D(size)
    return D(text)


A100 = "a100-80gb"


def test_kueue_unguaranteed_capacity_sits_in_the_root_cohort_so_caps_are_reachable():
    """demo-mig: 14 mig-1g.10gb slices, 6 guaranteed. Every slice is admissible, each team
    reaches its cap, and team-a's inference cap on mig-3g.40gb (lendingLimit 0) too."""
    objects = render_cluster(mig_plan())
    tree = KueueTree(objects)
    mig_1g, mig_3g = (A100, "nvidia.com/mig-1g.10gb"), (A100, "nvidia.com/mig-3g.40gb")
    assert tree.subtree("Cohort/portal", mig_1g) == 14
    assert tree.potential("team-b-dev", mig_1g) == 6
    assert tree.potential("team-c-dev", mig_1g) == 4
    assert tree.potential("team-a-inference", mig_3g) == 2
    # The whole tree holds exactly the capacity: the root's own share plus the guarantees.
    root = find(objects, "Cohort", "portal")["spec"]
    own = {
        r["name"]: r["nominalQuota"]
        for g in root["resourceGroups"]
        for f in g["flavors"]
        for r in f["resources"]
    }
    assert own["nvidia.com/mig-1g.10gb"] == "8"  # 14 - (4 + 2)
    assert own["nvidia.com/mig-3g.40gb"] == "3"  # 4 - 1, the inference guarantee stays local
    assert "borrowingLimit" not in str(root) and "lendingLimit" not in str(root)


def test_kueue_caps_reachable_through_department_cohorts():
    plan = hierarchy_plan()
    plan = ClusterPlan(
        name=plan.name,
        backends=plan.backends,
        namespaces=plan.namespaces,
        capacities=((GPU, D(24)),),
    )
    tree = KueueTree(render_cluster(plan))
    gpu = (A100, "nvidia.com/gpu")
    assert tree.subtree("Cohort/portal", gpu) == 24 - 4  # team-b's inference 4 never lent
    for name, cap in [("team-a-training", 10), ("team-b-inference", 6), ("team-d-dev", 2)]:
        assert tree.potential(name, gpu) == cap
    assert tree.potential("team-c-dev", gpu) == 4


@pytest.mark.parametrize("make_plan", [seed_plan, mig_plan, hierarchy_plan])
def test_every_cluster_queue_covers_cpu_and_memory(make_plan):
    """Every real pod requests cpu and memory: an uncovered resource leaves it pending."""
    objects = render_cluster(make_plan())
    tree = KueueTree(objects)
    for cq in (o for o in objects if o["kind"] == "ClusterQueue"):
        groups = cq["spec"]["resourceGroups"]
        covered = [r for g in groups for r in g["coveredResources"]]
        assert {"cpu", "memory"} <= set(covered)
        assert len(covered) == len(set(covered))  # a resource in one group only
        flavors = [f["name"] for g in groups for f in g["flavors"]]
        assert len(flavors) == len(set(flavors))  # a flavor in one group only
        for group in groups:
            for flavor in group["flavors"]:
                assert [r["name"] for r in flavor["resources"]] == group["coveredResources"]
        name = cq["metadata"]["name"]
        # Without a cpu / memory allocation and capacity: unbounded within the cluster.
        assert tree.potential(name, ("default-flavor", "cpu")) >= 10**9
        assert tree.potential(name, ("default-flavor", "memory")) >= 2**60
    flavors = {o["metadata"]["name"] for o in objects if o["kind"] == "ResourceFlavor"}
    assert "default-flavor" in flavors
    for obj in objects:
        assert validate_object(obj) == [], obj


def test_kueue_cpu_memory_pool_from_setting_else_capacity():
    namespaces = (
        ns("team-x-dev", team("team-x"), "dev", alloc(GPU, 1, 2), alloc(CPU, 8, 16)),
        ns("team-y-dev", team("team-y"), "dev", alloc(GPU, 1, 2), alloc(MEMORY, "16", "32")),
    )

    def pool(**settings):
        plan = ClusterPlan(
            name="c",
            backends=frozenset({"core", "kueue"}),
            namespaces=namespaces,
            capacities=((CPU, D(64)), (MEMORY, D(256)), (GPU, D(8))),
            **settings,
        )
        root = find(render_kueue_objects(plan), "Cohort", "portal")["spec"]["resourceGroups"]
        return {
            r["name"]: r["nominalQuota"] for g in root for f in g["flavors"] for r in f["resources"]
        }

    # From the recorded capacity, minus the guarantees (cpu 8, memory 16Gi) and minus the
    # other namespace's share of what is left (1 of 8 GPUs guaranteed: 1/8 of 56 cpu, 240Gi).
    assert pool() == {"cpu": "49", "memory": "210Gi", "nvidia.com/gpu": "6"}
    # The cluster's setting wins over the capacity (team-y's cpu share 92.5 / 8, rounded down
    # to a millicore).
    assert pool(kueue_cpu_pool=D("100.5"), kueue_memory_pool_gib=D(512)) == {
        "cpu": "80938m",
        "memory": "434Gi",
        "nvidia.com/gpu": "6",
    }
    plan = ClusterPlan(
        name="c", backends=frozenset({"core", "kueue"}), namespaces=namespaces, capacities=()
    )
    tree = KueueTree(render_kueue_objects(plan))
    # team-y has no cpu allocation: its share (half the GPU guarantees) of the unbounded pool
    # less team-x's 8 cpu, no borrowingLimit.
    cq = find(render_kueue_objects(plan), "ClusterQueue", "team-y-dev")["spec"]
    default = next(g for g in cq["resourceGroups"] if g["flavors"][0]["name"] == "default-flavor")
    assert default["flavors"][0]["resources"][0] == {"name": "cpu", "nominalQuota": "499999996"}
    assert tree.potential("team-y-dev", ("default-flavor", "cpu")) == 10**9
    assert tree.potential("team-x-dev", ("default-flavor", "cpu")) == 16  # its cap
    # No GPU capacity recorded: no shared GPU pool, the guarantees are all there is.
    assert tree.subtree("Cohort/portal", (A100, "nvidia.com/gpu")) == 2


def _own(spec: dict) -> dict[str, str]:
    return {
        r["name"]: r["nominalQuota"]
        for g in spec["resourceGroups"]
        for f in g["flavors"]
        for r in f["resources"]
    }


def reclaim_plan(**settings) -> ClusterPlan:
    """16 A100s, team A 10/14 and team B 6/10: all of the GPUs are guaranteed."""
    return ClusterPlan(
        name="c",
        backends=frozenset({"core", "kueue"}),
        capacities=((GPU, D(16)),),
        namespaces=(
            ns("team-a-training", team("team-a"), "training", alloc(GPU, 10, 14)),
            ns("team-b-training", team("team-b"), "training", alloc(GPU, 6, 10)),
        ),
        **settings,
    )


def test_kueue_cluster_queues_get_cpu_memory_nominal_in_proportion_to_their_gpu_guarantee():
    """Kueue reclaims lent quota only for a workload whose requests all fit the queue's nominal
    quota: a team's cpu / memory nominal must cover the pods of its guarantee."""
    plan = reclaim_plan(kueue_cpu_pool=D(96), kueue_memory_pool_gib=D(768))
    objects = render_kueue_objects(plan)
    team_a = _own(find(objects, "ClusterQueue", "team-a-training")["spec"])
    team_b = _own(find(objects, "ClusterQueue", "team-b-training")["spec"])
    assert team_a == {"nvidia.com/gpu": "10", "cpu": "60", "memory": "480Gi"}  # 10/16
    assert team_b == {"nvidia.com/gpu": "6", "cpu": "36", "memory": "288Gi"}  # 6/16
    # The root keeps only what is left: here nothing, the whole tree holds exactly the pool.
    assert _own(find(objects, "Cohort", "portal")["spec"]) == {
        "cpu": "0",
        "memory": "0",
        "nvidia.com/gpu": "0",
    }
    tree = KueueTree(objects)
    assert tree.subtree("Cohort/portal", ("default-flavor", "cpu")) == 96
    assert tree.subtree("Cohort/portal", ("default-flavor", "memory")) == 768 * 2**30
    # GPU rules unchanged: nominal = guarantee, nominal + borrowingLimit = cap; cpu / memory
    # have no borrowingLimit, so a borrowing team can use the rest of the pool.
    assert tree.potential("team-a-training", (A100, "nvidia.com/gpu")) == 14
    assert tree.potential("team-b-training", (A100, "nvidia.com/gpu")) == 10
    assert tree.potential("team-a-training", ("default-flavor", "cpu")) == 96
    for name in ("team-a-training", "team-b-training"):
        preemption = find(objects, "ClusterQueue", name)["spec"]["preemption"]
        assert preemption == {
            "borrowWithinCohort": {"policy": "LowerPriority"},
            "reclaimWithinCohort": "Any",
            "withinClusterQueue": "LowerPriority",
        }
    for obj in objects:
        assert validate_object(obj) == [], obj


def test_kueue_cpu_memory_shares_leave_allocations_alone_and_never_exceed_the_pool():
    # team-c has its own cpu allocation: nominal = its guarantee, the others share the rest.
    # Guarantees of different resources (GPUs, MIG slices) add up to more than the cluster:
    # the shares are scaled down to fit the pool.
    plan = ClusterPlan(
        name="c",
        backends=frozenset({"core", "kueue"}),
        capacities=((GPU, D(8)), (MIG_1G, D(14))),
        kueue_cpu_pool=D(100),
        kueue_memory_pool_gib=D(100),
        namespaces=(
            ns("team-a-training", team("team-a"), "training", alloc(GPU, 8, 8)),
            ns("team-b-dev", team("team-b"), "dev", alloc(MIG_1G, 7, 14)),
            ns("team-c-dev", team("team-c"), "dev", alloc(GPU, 0, 2), alloc(CPU, 10, 20)),
        ),
    )
    objects = render_kueue_objects(plan)
    cpu = {
        o["metadata"]["name"]: _own(o["spec"])["cpu"]
        for o in objects
        if o["kind"] in ("ClusterQueue", "Cohort")
    }
    # 90 cores left after team-c's 10: shares 1 (8/8) and 0.5 (7/14), scaled to 2/3 and 1/3.
    assert cpu == {"portal": "0", "team-a-training": "60", "team-b-dev": "30", "team-c-dev": "10"}
    tree = KueueTree(objects)
    assert tree.subtree("Cohort/portal", ("default-flavor", "cpu")) == 100
    assert tree.subtree("Cohort/portal", ("default-flavor", "memory")) == 100 * 2**30
    assert tree.potential("team-c-dev", ("default-flavor", "cpu")) == 20  # its cap
    for obj in objects:
        assert validate_object(obj) == [], obj


# --------------------------------------------------------------------------------------------
# HAMi: no scoped quota on limits. keys


def test_scoped_zero_quota_uses_requests_keys_only_even_for_hami():
    """HAMi's quota manager reads limits.<vGPU> of every quota and ignores scopeSelector."""
    namespace = ns(
        "team-x-dev",
        team("team-x"),
        "dev",
        alloc(GPUMEM, 1024, 4096, classes=("experiment",)),
        alloc(GPUCORES, 30, 100, classes=("experiment",)),
        alloc(GPU, 1, 2, classes=("experiment",)),
    )
    plan = ClusterPlan(name="c", backends=frozenset({"core"}), namespaces=(namespace,))
    quota, other = render_resource_quotas(plan, namespace)
    assert quota["spec"]["hard"]["limits.nvidia.com/gpumem"] == "4096"  # HAMi's own cap
    assert other["spec"]["hard"] == {
        "requests.nvidia.com/gpucores": "0",
        "requests.nvidia.com/gpu": "0",
        "requests.nvidia.com/gpumem": "0",
    }
    for q in (quota, other):
        assert validate_object(q) == []
    for obj in render_cluster(plan):
        if obj["kind"] == "ResourceQuota" and "scopeSelector" in obj["spec"]:
            assert not [k for k in obj["spec"]["hard"] if k.startswith("limits.")]


# --------------------------------------------------------------------------------------------
# Volcano: the namespace names its queue; weight within the CRD's range


def test_namespace_names_its_volcano_queue_only_with_volcano():
    objects = render_cluster(hierarchy_plan())
    for name in ("team-a-training", "team-b-inference", "team-c-dev", "team-d-dev"):
        namespace = find(objects, "Namespace", name)
        assert namespace["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] == name
        assert find(objects, "Queue", name)  # the queue it names exists
        assert validate_object(namespace) == []
    for backends in ({"core"}, {"core", "kueue", "yunikorn"}):
        for obj in render_cluster(hierarchy_plan(backends=backends)):
            assert "scheduling.volcano.sh/queue-name" not in obj["metadata"].get("annotations", {})
    # A namespace without allocations has no queue, so it names none.
    plan = ClusterPlan(
        name="c", backends=ALL_BACKENDS, namespaces=(ns("team-x-dev", team("team-x"), "dev"),)
    )
    assert "annotations" not in find(render_cluster(plan), "Namespace", "team-x-dev")["metadata"]


def test_volcano_weight_at_most_65535():
    assert volcano_weight([alloc(GPU, 70000, 70000)]) == 65535
    plan = ClusterPlan(
        name="c",
        backends=frozenset({"core", "volcano"}),
        namespaces=(
            ns("team-a-training", team("team-a", "big"), "training", alloc(GPU, 40000, 40000)),
            ns("team-b-training", team("team-b", "big"), "training", alloc(GPU, 40000, 40000)),
        ),
    )
    queues = {q["metadata"]["name"]: q for q in render_volcano_queues(plan)}
    assert queues["big"]["spec"]["weight"] == 65535
    for queue in queues.values():
        assert validate_object(queue) == [], queue
