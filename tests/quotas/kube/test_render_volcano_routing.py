"""The Volcano queue policies: rendered with Volcano only, the mutating one only where the API
server serves it, and valid against the Kubernetes 1.36 admissionregistration schema."""

from dataclasses import replace

from kubesandbox.schemas import validate_object
from quotas.kube.render import (
    VOLCANO_QUEUE_POLICY_NAME,
    render_cluster,
    render_volcano_queue_policy,
)
from tests.support.plans import seed_plan


def test_no_volcano_no_queue_policy():
    assert render_volcano_queue_policy(seed_plan(backends=frozenset({"core", "kueue"}))) == []


def test_the_validating_policy_alone_where_mutating_policies_are_not_served():
    objects = render_volcano_queue_policy(seed_plan())
    assert [o["kind"] for o in objects] == [
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ]
    policy = objects[0]
    assert policy["metadata"]["name"] == VOLCANO_QUEUE_POLICY_NAME
    resources = {
        r["resources"][0]: r["operations"]
        for r in policy["spec"]["matchConstraints"]["resourceRules"]
    }
    assert resources == {
        "jobs": ["CREATE", "UPDATE"],
        "podgroups": ["CREATE", "UPDATE"],
        "pods": ["CREATE"],
    }
    for obj in objects:
        assert validate_object(obj) == [], obj


def test_the_mutating_policy_where_served_sets_only_empty_or_default_queues():
    plan = replace(seed_plan(), mutating_policies_served=True)
    objects = render_cluster(plan)
    mutating = [o for o in objects if o["kind"].startswith("MutatingAdmissionPolicy")]
    assert [o["kind"] for o in mutating] == [
        "MutatingAdmissionPolicy",
        "MutatingAdmissionPolicyBinding",
    ]
    spec = mutating[0]["spec"]
    # A failed mutation never blocks: the validating policy still refuses what is left wrong.
    assert spec["failurePolicy"] == "Ignore"
    assert {
        r["resources"][0]: r["operations"] for r in spec["matchConstraints"]["resourceRules"]
    } == {
        "jobs": ["CREATE"],
        "podgroups": ["CREATE"],
        "pods": ["CREATE"],
    }
    assert all("'default'" in m["jsonPatch"]["expression"] for m in spec["mutations"])
    for obj in mutating:
        assert validate_object(obj) == [], obj
