"""deploy/kubernetes/*.yaml: strictly valid objects, least-privilege RBAC, no secrets in the repo.

The schema directory has core/v1 and rbac/v1 but not apps/v1 or batch/v1: the pod template of
a Deployment or Job is validated as a core ``PodTemplate`` and the remaining top-level fields
are checked here by hand.
"""

import re
from pathlib import Path

import pytest
import yaml

from kubesandbox.schemas import validate_object

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
NAMESPACE = "gpu-quota-portal"
SECRET_NAME = "gpu-quota-portal"
SECRET_KEYS = {"DJANGO_SECRET_KEY", "AUDIT_MAC_KEY", "DATABASE_URL", "CELERY_BROKER_URL"}
IMAGE = "gpu-quota-portal:latest"

# (apiGroup, resource) -> exactly the verbs the sync needs.
WRITE = {"get", "list", "create", "patch", "delete"}
REQUIRED_RULES = {
    ("", "namespaces"): {"get", "list", "create", "patch"},
    ("", "resourcequotas"): WRITE,
    ("", "limitranges"): WRITE,
    ("", "configmaps"): WRITE,
    ("", "pods"): {"list"},
    ("", "events"): {"list"},
    ("batch", "jobs"): {"list"},
    ("apps", "replicasets"): {"list"},
    ("scheduling.volcano.sh", "podgroups"): {"list"},
    ("kueue.x-k8s.io", "workloads"): {"list"},
    ("scheduling.k8s.io", "priorityclasses"): WRITE,
    ("admissionregistration.k8s.io", "validatingadmissionpolicies"): WRITE,
    ("admissionregistration.k8s.io", "validatingadmissionpolicybindings"): WRITE,
    ("admissionregistration.k8s.io", "mutatingadmissionpolicies"): WRITE,
    ("admissionregistration.k8s.io", "mutatingadmissionpolicybindings"): WRITE,
    ("scheduling.volcano.sh", "queues"): WRITE,
    ("kueue.x-k8s.io", "clusterqueues"): WRITE,
    ("kueue.x-k8s.io", "localqueues"): WRITE,
    ("kueue.x-k8s.io", "resourceflavors"): WRITE,
    ("kueue.x-k8s.io", "cohorts"): WRITE,
}

DEPLOYMENT_SPEC_FIELDS = {
    "replicas",
    "revisionHistoryLimit",
    "selector",
    "strategy",
    "template",
    "minReadySeconds",
    "progressDeadlineSeconds",
    "paused",
}
JOB_SPEC_FIELDS = {
    "backoffLimit",
    "ttlSecondsAfterFinished",
    "template",
    "activeDeadlineSeconds",
    "completions",
    "parallelism",
}


def load_all() -> list[tuple[str, dict]]:
    docs = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is not None:
                docs.append((path.name, doc))
    return docs


DOCS = load_all()


def of_kind(kind: str) -> list[dict]:
    return [doc for _, doc in DOCS if doc["kind"] == kind]


def deployments() -> dict[str, dict]:
    return {
        d["metadata"]["name"].removeprefix("gpu-quota-portal-"): d for d in of_kind("Deployment")
    }


def pod_templates() -> list[tuple[str, dict]]:
    """(name, pod template) of every Deployment and Job."""
    return [
        (doc["metadata"]["name"], doc["spec"]["template"])
        for _, doc in DOCS
        if doc["kind"] in ("Deployment", "Job")
    ]


def as_pod_template(workload: dict) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {
            "name": workload["metadata"]["name"],
            "namespace": workload["metadata"]["namespace"],
            "labels": workload["metadata"].get("labels", {}),
        },
        "template": workload["spec"]["template"],
    }


def test_the_expected_files_exist():
    names = {p.name for p in DEPLOY.glob("*.yaml")}
    assert {
        "namespace.yaml",
        "serviceaccount.yaml",
        "rbac.yaml",
        "deployment-web.yaml",
        "deployment-worker.yaml",
        "deployment-beat.yaml",
        "service.yaml",
        "configmap.yaml",
    } <= names


@pytest.mark.parametrize(("filename", "doc"), DOCS, ids=[f"{f}:{d['kind']}" for f, d in DOCS])
def test_every_document_validates_strictly(filename, doc):
    if doc["kind"] in ("Deployment", "Job"):
        expected_api = {"Deployment": "apps/v1", "Job": "batch/v1"}[doc["kind"]]
        assert doc["apiVersion"] == expected_api
        assert set(doc) == {"apiVersion", "kind", "metadata", "spec"}
        assert set(doc["metadata"]) <= {"name", "namespace", "labels", "annotations"}
        allowed = DEPLOYMENT_SPEC_FIELDS if doc["kind"] == "Deployment" else JOB_SPEC_FIELDS
        assert set(doc["spec"]) <= allowed
        assert validate_object(as_pod_template(doc)) == []
    else:
        assert validate_object(doc) == []
    if doc["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding"):
        assert doc["metadata"]["namespace"] == NAMESPACE


def test_pod_template_validation_can_fail():
    web = deployments()["web"]
    broken = as_pod_template(web)
    broken["template"]["spec"]["containers"][0]["livenesProbe"] = {}
    assert [e.field for e in validate_object(broken)] == [
        "template.spec.containers[0].livenesProbe"
    ]


def test_deployments_select_their_own_pods():
    for name, deployment in deployments().items():
        selector = deployment["spec"]["selector"]["matchLabels"]
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert selector.items() <= labels.items()
        assert selector["app.kubernetes.io/component"] == name
    service = of_kind("Service")[0]
    web_labels = deployments()["web"]["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= web_labels.items()
    assert service["spec"]["ports"][0]["targetPort"] == "http"


def test_beat_runs_alone():
    beat = deployments()["beat"]["spec"]
    assert beat["replicas"] == 1
    assert beat["strategy"] == {"type": "Recreate"}


def test_probes():
    web = deployments()["web"]["spec"]["template"]["spec"]["containers"][0]
    assert web["ports"] == [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]
    assert web["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert web["readinessProbe"]["httpGet"]["path"] == "/readyz"
    for probe in (web["livenessProbe"], web["readinessProbe"]):
        assert probe["httpGet"]["port"] in (8000, "http")
        # The kubelet would send the pod IP as Host, which ALLOWED_HOSTS rejects.
        assert {"name": "Host", "value": "localhost"} in probe["httpGet"]["httpHeaders"]
    settings = of_kind("ConfigMap")[0]["data"]
    assert "localhost" in settings["DJANGO_ALLOWED_HOSTS"].split(",")

    worker = deployments()["worker"]["spec"]["template"]["spec"]["containers"][0]
    command = " ".join(worker["livenessProbe"]["exec"]["command"])
    assert "celery -A portal inspect ping -d celery@$HOSTNAME" in command
    assert worker["livenessProbe"]["exec"]["command"][:2] == ["sh", "-c"]

    beat = deployments()["beat"]["spec"]["template"]["spec"]["containers"][0]
    assert beat["livenessProbe"]["exec"]["command"] == ["python", "manage.py", "check_ready"]


@pytest.mark.parametrize("name", ["web", "worker", "beat", "migrate"])
def test_pods_are_locked_down(name):
    templates = dict(pod_templates())
    pod = templates[f"gpu-quota-portal-{name}"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001
    assert pod["serviceAccountName"] == "gpu-quota-portal"
    volumes = {v["name"]: v for v in pod["volumes"]}
    for container in pod["containers"]:
        assert container["image"] == IMAGE
        security = container["securityContext"]
        assert security["runAsNonRoot"] is True
        assert security["runAsUser"] == 10001
        assert security["readOnlyRootFilesystem"] is True
        assert security["allowPrivilegeEscalation"] is False
        assert security["capabilities"] == {"drop": ["ALL"]}
        assert "privileged" not in security
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        assert "emptyDir" in volumes[mounts["/var/lib/portal"]]
        assert "emptyDir" in volumes[mounts["/tmp"]]
        resources = container["resources"]
        assert set(resources["requests"]) == {"cpu", "memory"}
        assert set(resources["limits"]) == {"cpu", "memory"}


def test_only_the_pods_that_talk_to_kubernetes_get_a_token():
    automount = {
        name: d["spec"]["template"]["spec"]["automountServiceAccountToken"]
        for name, d in deployments().items()
    }
    assert automount == {"web": True, "worker": True, "beat": False}
    (account,) = of_kind("ServiceAccount")
    assert account["automountServiceAccountToken"] is False


def test_cluster_role_grants_exactly_what_the_sync_needs():
    (role,) = of_kind("ClusterRole")
    granted: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        assert set(rule) == {"apiGroups", "resources", "verbs"}  # no resourceNames, no URLs
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                assert "*" not in (group, resource)
                assert "/" not in resource  # no subresources (pods/exec, .../status)
                assert "*" not in rule["verbs"]
                granted.setdefault((group, resource), set()).update(rule["verbs"])
    assert granted == REQUIRED_RULES


def test_cluster_role_lets_the_sync_write_every_kind_it_manages():
    from quotas.kube.client import KINDS

    (role,) = of_kind("ClusterRole")
    granted = {
        (group, resource): set(rule["verbs"])
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    for (api_version, kind), path in KINDS.items():
        group = api_version.rpartition("/")[0]
        if kind == "Pod":
            needed = {"list"}
        elif kind == "Namespace":  # created, never deleted
            needed = {"list", "create", "patch"}
        else:
            needed = {"list", "create", "patch", "delete"}
        assert needed <= granted.get((group, path.plural), set()), kind


def test_cluster_role_lets_the_portal_list_every_kind_it_reads():
    from quotas.kube.client import READ_ONLY_KINDS

    (role,) = of_kind("ClusterRole")
    listed = {
        (group, resource)
        for rule in role["rules"]
        if "list" in rule["verbs"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    for (api_version, _kind), path in READ_ONLY_KINDS.items():
        assert (api_version.rpartition("/")[0], path.plural) in listed, path.plural


def test_cluster_role_is_bound_to_the_service_account():
    (binding,) = of_kind("ClusterRoleBinding")
    (role,) = of_kind("ClusterRole")
    (account,) = of_kind("ServiceAccount")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": account["metadata"]["name"],
            "namespace": account["metadata"]["namespace"],
        }
    ]


def test_secrets_are_referenced_not_stored():
    assert of_kind("Secret") == []
    for name, template in pod_templates():
        for container in template["spec"]["containers"]:
            refs = {
                e["name"]: e["valueFrom"]["secretKeyRef"]
                for e in container.get("env", ())
                if "secretKeyRef" in e.get("valueFrom", {})
            }
            assert set(refs) == SECRET_KEYS, name
            for env_name, ref in refs.items():
                assert ref == {"name": SECRET_NAME, "key": env_name}
            assert all("value" not in e for e in container["env"] if e["name"] in SECRET_KEYS)
    settings = of_kind("ConfigMap")[0]["data"]
    assert not SECRET_KEYS & set(settings)
    assert not [k for k in settings if re.search(r"SECRET|PASSWORD|TOKEN", k)]
    text = "\n".join(p.read_text() for p in DEPLOY.glob("*.yaml"))
    # No credentials in any URL (the documented example uses a PASSWORD placeholder).
    for url in re.findall(r"[a-z]+://[^\s\"']+", text):
        userinfo = url.split("://", 1)[1].split("@", 1)[0] if "@" in url else ""
        assert userinfo in ("", "portal:PASSWORD"), url
    # The secret's keys are documented for whoever creates it.
    configmap_text = (DEPLOY / "configmap.yaml").read_text()
    for key in SECRET_KEYS:
        assert key in configmap_text
