"""Strict validation against the real Kubernetes, Volcano and Kueue schemas."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubesandbox import schemas
from kubesandbox.schemas import FieldError, known_kinds, validate_object

MANAGED = {"app.kubernetes.io/managed-by": "portal"}

VALID: dict[str, dict[str, Any]] = {
    "ResourceQuota": {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpu-quota", "namespace": "team-a-training", "labels": MANAGED},
        "spec": {
            "hard": {
                "requests.nvidia.com/gpu": "10",
                "limits.nvidia.com/gpumem": "40Gi",
                "cpu": 64,
            },
            "scopeSelector": {
                "matchExpressions": [
                    {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}
                ]
            },
        },
    },
    "LimitRange": {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "gpu-per-pod", "namespace": "team-a-training"},
        "spec": {"limits": [{"type": "Container", "max": {"nvidia.com/gpu": "4"}}]},
    },
    "Queue": {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "team-a-training", "labels": MANAGED},
        "spec": {
            "weight": 2,
            "reclaimable": True,
            "deserved": {"nvidia.com/gpu": "6"},
            "capability": {"nvidia.com/gpu": 10},
            "parent": "research",
        },
    },
    "ClusterQueue": {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "team-a-training"},
        "spec": {
            "cohortName": "gpu-pool",
            "namespaceSelector": {
                "matchLabels": {"kubernetes.io/metadata.name": "team-a-training"}
            },
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": "a100",
                            "resources": [
                                {"name": "nvidia.com/gpu", "nominalQuota": 6, "borrowingLimit": "4"}
                            ],
                        }
                    ],
                }
            ],
        },
    },
    "LocalQueue": {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "default", "namespace": "team-a-training"},
        "spec": {"clusterQueue": "team-a-training"},
    },
    "ResourceFlavor": {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "a100"},
        "spec": {"nodeLabels": {"nvidia.com/gpu.product": "A100-SXM4-80GB"}},
    },
    "PriorityClass": {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "inference-high"},
        "value": 100000,
        "preemptionPolicy": "PreemptLowerPriority",
        "description": "production inference",
    },
    "ConfigMap": {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "yunikorn-configs", "namespace": "yunikorn"},
        "data": {"queues.yaml": "partitions: []\n"},
    },
    "Namespace": {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": "team-a-inference",
            "labels": {**MANAGED, "portal.example/team": "team-a"},
        },
    },
}


@pytest.mark.parametrize("kind", sorted(VALID))
def test_valid_objects_pass(kind: str) -> None:
    assert validate_object(VALID[kind]) == []


def _fields(errors: list[FieldError]) -> list[str]:
    return [e.field for e in errors]


def test_unknown_field_is_an_error_naming_it() -> None:
    obj = {**VALID["ResourceQuota"], "spec": {"hard": {"cpu": "1"}, "hardd": {"cpu": "2"}}}
    errors = validate_object(obj)
    assert _fields(errors) == ["spec.hardd"]
    assert "unknown field" in errors[0].message


def test_unknown_field_in_crd_and_in_its_metadata() -> None:
    queue = VALID["Queue"]
    obj = {
        **queue,
        "metadata": {**queue["metadata"], "lables": {}},
        "spec": {**queue["spec"], "capacity": {}},
    }
    assert _fields(validate_object(obj)) == ["metadata.lables", "spec.capacity"]


def test_unknown_field_inside_list_items() -> None:
    obj = {
        **VALID["LimitRange"],
        "spec": {"limits": [{"type": "Container", "maximum": {"cpu": "1"}}]},
    }
    assert _fields(validate_object(obj)) == ["spec.limits[0].maximum"]


def test_bad_quantity_names_the_map_key() -> None:
    obj = {**VALID["ResourceQuota"], "spec": {"hard": {"requests.nvidia.com/gpu": "ten"}}}
    errors = validate_object(obj)
    assert _fields(errors) == ["spec.hard[requests.nvidia.com/gpu]"]
    assert errors[0].message.startswith('Invalid value: "ten": quantities must match')


@pytest.mark.parametrize("value", ["1.5", "500m", "40Gi", "1e3", "+2", "-1", ".5", 7, 0.5])
def test_good_quantities(value: Any) -> None:
    obj = {
        **VALID["LimitRange"],
        "spec": {"limits": [{"type": "Container", "max": {"cpu": value}}]},
    }
    assert validate_object(obj) == []


@pytest.mark.parametrize("value", ["ten", "1GB", "1.2.3", "", "Gi", "1 Gi", True])
def test_bad_quantities_in_list_item(value: Any) -> None:
    obj = {
        **VALID["LimitRange"],
        "spec": {"limits": [{"type": "Container", "max": {"nvidia.com/gpu": value}}]},
    }
    assert _fields(validate_object(obj)) == ["spec.limits[0].max[nvidia.com/gpu]"]


def test_bad_quantity_in_crd_uses_the_crd_pattern() -> None:
    obj = {
        **VALID["Queue"],
        "spec": {**VALID["Queue"]["spec"], "capability": {"nvidia.com/gpu": "lots"}},
    }
    errors = validate_object(obj)
    assert _fields(errors) == ["spec.capability[nvidia.com/gpu]"]
    assert "quantities must match" in errors[0].message


def test_wrong_types() -> None:
    priority = {**VALID["PriorityClass"], "value": "high"}
    assert _fields(validate_object(priority)) == ["value"]
    limits = {**VALID["LimitRange"], "spec": {"limits": {"type": "Container"}}}
    assert _fields(validate_object(limits)) == ["spec.limits"]
    queue = {**VALID["Queue"], "spec": {**VALID["Queue"]["spec"], "reclaimable": "yes"}}
    errors = validate_object(queue)
    assert _fields(errors) == ["spec.reclaimable"]
    assert "boolean" in errors[0].message


def test_enum_and_required() -> None:
    cq = VALID["ClusterQueue"]
    errors = validate_object({**cq, "spec": {**cq["spec"], "queueingStrategy": "Sometimes"}})
    assert _fields(errors) == ["spec.queueingStrategy"]
    assert errors[0].message.startswith('Unsupported value: "Sometimes": supported values: ')
    limits = {**VALID["LimitRange"], "spec": {"limits": [{"max": {"cpu": "1"}}]}}
    errors = validate_object(limits)
    assert errors == [FieldError("spec.limits[0].type", "Required value")]


@pytest.mark.parametrize(
    ("kind", "name"),
    [
        ("Namespace", "Team_A"),
        ("Namespace", "a" * 64),
        ("Namespace", "team.a"),
        ("ResourceQuota", "gpu quota"),
        ("Queue", "-queue"),
        ("ClusterQueue", "UPPER"),
    ],
)
def test_bad_names(kind: str, name: str) -> None:
    obj = {**VALID[kind], "metadata": {**VALID[kind]["metadata"], "name": name}}
    assert _fields(validate_object(obj)) == ["metadata.name"]


def test_subdomain_names_are_fine_except_for_namespaces() -> None:
    rq = {
        **VALID["ResourceQuota"],
        "metadata": {**VALID["ResourceQuota"]["metadata"], "name": "gpu.quota"},
    }
    assert validate_object(rq) == []


def test_missing_name() -> None:
    obj = {**VALID["ConfigMap"], "metadata": {"namespace": "x"}}
    assert _fields(validate_object(obj)) == ["metadata.name"]


@pytest.mark.parametrize(
    "labels",
    [
        {"bad key!": "v"},
        {"-leading": "v"},
        {"Example.COM/x": "v"},
        {"k": "bad value!"},
        {"k": "v" * 64},
        {"a/b/c": "v"},
    ],
)
def test_bad_labels(labels: dict[str, str]) -> None:
    obj = {**VALID["Namespace"], "metadata": {"name": "team-a", "labels": labels}}
    assert _fields(validate_object(obj)) == ["metadata.labels"]


def test_good_labels() -> None:
    labels = {"app.kubernetes.io/managed-by": "portal", "k": "", "x_y.z": "A-1_b.2"}
    assert (
        validate_object({**VALID["Namespace"], "metadata": {"name": "team-a", "labels": labels}})
        == []
    )


def test_unknown_kind_or_version() -> None:
    assert _fields(
        validate_object({"apiVersion": "v1", "kind": "Gadget", "metadata": {"name": "x"}})
    ) == ["kind"]
    queue = {**VALID["Queue"], "apiVersion": "scheduling.volcano.sh/v1"}
    assert _fields(validate_object(queue)) == ["kind"]


def test_nulls_are_unset_like_the_api_server_decodes_them() -> None:
    obj = {
        **VALID["ConfigMap"],
        "metadata": {**VALID["ConfigMap"]["metadata"], "creationTimestamp": None},
    }
    assert validate_object(obj) == []


def test_known_kinds_cover_core_and_crds_in_all_versions() -> None:
    kinds = known_kinds()
    rq = kinds[("v1", "ResourceQuota")]
    assert (rq.group, rq.version, rq.plural, rq.namespaced) == ("", "v1", "resourcequotas", True)
    assert kinds[("v1", "Namespace")].namespaced is False
    assert kinds[("scheduling.k8s.io/v1", "PriorityClass")].plural == "priorityclasses"
    assert kinds[("rbac.authorization.k8s.io/v1", "RoleBinding")].namespaced is True
    assert kinds[("policy/v1", "PodDisruptionBudget")].plural == "poddisruptionbudgets"
    assert kinds[("scheduling.volcano.sh/v1beta1", "Queue")].namespaced is False
    for version in ("v1beta1", "v1beta2"):
        for kind, namespaced in (
            ("ClusterQueue", False),
            ("LocalQueue", True),
            ("ResourceFlavor", False),
            ("Cohort", False),
        ):
            info = kinds[(f"kueue.x-k8s.io/{version}", kind)]
            assert (info.group, info.kind, info.namespaced) == ("kueue.x-k8s.io", kind, namespaced)


def test_kueue_versions_have_their_own_schemas() -> None:
    # v1beta2 renamed ClusterQueue.spec.cohort to spec.cohortName.
    cq = VALID["ClusterQueue"]
    v1beta1 = {**cq, "apiVersion": "kueue.x-k8s.io/v1beta1"}
    assert "spec.cohortName" in _fields(validate_object(v1beta1))
    v1beta1["spec"] = {k: v for k, v in cq["spec"].items() if k != "cohortName"} | {
        "cohort": "gpu-pool"
    }
    assert validate_object(v1beta1) == []


def test_openapi_document_for_a_crd_group_version() -> None:
    doc = schemas.openapi_document("apis/kueue.x-k8s.io/v1beta2")
    assert doc is not None
    component = doc["components"]["schemas"]["io.x-k8s.kueue.v1beta2.ClusterQueue"]
    assert component["x-kubernetes-group-version-kind"] == [
        {"group": "kueue.x-k8s.io", "version": "v1beta2", "kind": "ClusterQueue"}
    ]
    assert "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" in doc["components"]["schemas"]
    core = schemas.openapi_document("api/v1")
    assert core is not None and "io.k8s.api.core.v1.ResourceQuota" in core["components"]["schemas"]
    assert schemas.openapi_document("apis/nope/v1") is None


def test_schema_dir_env_override(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KUBE_SCHEMA_DIR", str(tmp_path))
    assert schemas.schema_dir() == tmp_path
    missing = tmp_path / "missing"
    monkeypatch.setenv("KUBE_SCHEMA_DIR", str(missing))
    with pytest.raises(schemas.SchemaDirNotFound, match="missing"):
        schemas.schema_dir()
    monkeypatch.setenv("KUBE_SCHEMA_DIR", "")
    assert (schemas.schema_dir() / "kubernetes-1.35").is_dir()
