"""The one place that talks to Kubernetes API servers, through the official client.

Objects are plain dicts (JSON as the API server sends it). Errors are split into transient ones
(429, 5xx, timeouts, refused or dropped connections), which callers retry, and the rest.
"""

import json
import logging
import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from quotas.kube.objects import ObjectKey

log = logging.getLogger(__name__)

TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True)
class KindPath:
    plural: str
    namespaced: bool


# The kinds the portal reads and writes (facts of the Kubernetes, Volcano and Kueue APIs).
# LimitRange stays listed so that the sync still finds and prunes the portal's old per-pod
# LimitRanges (gpu-limits), which nothing renders any more.
KINDS: dict[tuple[str, str], KindPath] = {
    ("v1", "Namespace"): KindPath("namespaces", False),
    ("v1", "ResourceQuota"): KindPath("resourcequotas", True),
    ("v1", "LimitRange"): KindPath("limitranges", True),
    ("v1", "ConfigMap"): KindPath("configmaps", True),
    ("v1", "Pod"): KindPath("pods", True),
    ("scheduling.k8s.io/v1", "PriorityClass"): KindPath("priorityclasses", False),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"): KindPath(
        "validatingadmissionpolicies", False
    ),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"): KindPath(
        "validatingadmissionpolicybindings", False
    ),
    ("admissionregistration.k8s.io/v1", "MutatingAdmissionPolicy"): KindPath(
        "mutatingadmissionpolicies", False
    ),
    ("admissionregistration.k8s.io/v1", "MutatingAdmissionPolicyBinding"): KindPath(
        "mutatingadmissionpolicybindings", False
    ),
    ("scheduling.volcano.sh/v1beta1", "Queue"): KindPath("queues", False),
    ("kueue.x-k8s.io/v1beta2", "ClusterQueue"): KindPath("clusterqueues", False),
    ("kueue.x-k8s.io/v1beta2", "LocalQueue"): KindPath("localqueues", True),
    ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"): KindPath("resourceflavors", False),
    ("kueue.x-k8s.io/v1beta2", "Cohort"): KindPath("cohorts", False),
}

# The kinds the portal only reads, never writes (quotas.kube.waiting: why work waits).
READ_ONLY_KINDS: dict[tuple[str, str], KindPath] = {
    ("v1", "Event"): KindPath("events", True),
    ("batch/v1", "Job"): KindPath("jobs", True),
    ("apps/v1", "ReplicaSet"): KindPath("replicasets", True),
    ("kueue.x-k8s.io/v1beta2", "Workload"): KindPath("workloads", True),
    ("scheduling.volcano.sh/v1beta1", "PodGroup"): KindPath("podgroups", True),
}


class KubeError(Exception):
    """The API server refused a request, or could not be reached."""

    def __init__(self, message: str, *, status: int | None = None, reason: str = ""):
        super().__init__(message)
        self.status = status
        self.reason = reason

    @property
    def transient(self) -> bool:
        return self.status is None or self.status in TRANSIENT_STATUSES


class KubeConfigError(KubeError):
    """The portal's own configuration for a cluster is unusable (no kubeconfig, no context)."""

    @property
    def transient(self) -> bool:
        return False


class KubeConflict(KubeError):
    """409: the object exists already, or changed since it was read."""


class KubeNotFound(KubeError):
    """404: the object (or its namespace) does not exist."""


def object_path(api_version: str, kind: str, namespace: str = "", name: str = "") -> str:
    try:
        info = KINDS.get((api_version, kind)) or READ_ONLY_KINDS[(api_version, kind)]
    except KeyError:
        raise KubeError(f"kind {kind} of {api_version} is not one the portal manages") from None
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    if info.namespaced and namespace:
        base += f"/namespaces/{quote(namespace, safe='')}"
    path = f"{base}/{info.plural}"
    if name:
        path += f"/{quote(name, safe='')}"
    return path


class KubeClient:
    """A thin JSON client over one cluster's API server."""

    def __init__(self, api_client: k8s.ApiClient, *, timeout: float = 15.0):
        self.api = api_client
        self.timeout = timeout

    @classmethod
    def for_url(
        cls,
        url: str,
        *,
        token: str | None = None,
        ca_file: str | None = None,
        timeout: float = 15.0,
    ) -> "KubeClient":
        """A client for an API server at ``url``; an https server's certificate must chain to
        ``ca_file`` (PEM) when given, else to the system's trusted CAs."""
        configuration = k8s.Configuration(host=url)
        if ca_file:
            configuration.ssl_ca_cert = ca_file
        if token:
            configuration.api_key = {"BearerToken": token}
            configuration.api_key_prefix = {"BearerToken": "Bearer"}
        configuration.retries = False
        return cls(k8s.ApiClient(configuration), timeout=timeout)

    @classmethod
    def from_kubeconfig(
        cls, path: str, context: str | None = None, *, timeout: float = 15.0
    ) -> "KubeClient":
        configuration = k8s.Configuration()
        k8s_config.load_kube_config(
            config_file=path, context=context or None, client_configuration=configuration
        )
        configuration.retries = False
        return cls(k8s.ApiClient(configuration), timeout=timeout)

    @classmethod
    def in_cluster(cls, *, timeout: float = 15.0) -> "KubeClient":
        configuration = k8s.Configuration()
        k8s_config.load_incluster_config(client_configuration=configuration)
        configuration.retries = False
        return cls(k8s.ApiClient(configuration), timeout=timeout)

    def close(self) -> None:
        self.api.close()

    # --- requests -------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Any:
        if query:
            path = f"{path}?{urlencode(query)}"
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        method_, url, headers, body_, _post = self.api.param_serialize(
            method=method,
            resource_path=path,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        try:
            response = self.api.call_api(
                method_, url, headers, body_, _request_timeout=self.timeout
            )
            response.read()
        except k8s.ApiException as exc:  # raised by some transports on HTTP errors
            if not exc.status:
                # Status 0: no HTTP answer at all, the client's own TLS failure.
                raise self._tls_error(str(exc.reason or ""), method, path) from None
            raise self._error(exc.status, exc.body or b"", method, path) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise KubeError(f"{method} {path}: {type(exc).__name__}: {exc}") from None
        status = response.status
        if status >= 400:
            raise self._error(status, response.data or b"", method, path)
        if not response.data:
            return None
        return json.loads(response.data)

    @staticmethod
    def _tls_error(reason: str, method: str, path: str) -> KubeError:
        text = f"{method} {path}: {' '.join(reason.split())}"[:500]
        if "CERTIFICATE_VERIFY_FAILED" in reason:
            # A server certificate the portal does not trust: its configuration (the CA, or
            # the URL) needs fixing, retrying will not help.
            return KubeConfigError(text)
        return KubeError(text)

    @staticmethod
    def _error(status: int, data: bytes | str, method: str, path: str) -> KubeError:
        message, reason = "", ""
        try:
            payload = json.loads(data)
            message, reason = payload.get("message", ""), payload.get("reason", "")
        except (ValueError, AttributeError):
            message = (data.decode(errors="replace") if isinstance(data, bytes) else data)[:300]
        text = f"{method} {path}: {status} {reason}: {message}".strip()
        if status == 409:
            return KubeConflict(text, status=status, reason=reason)
        if status == 404:
            return KubeNotFound(text, status=status, reason=reason)
        return KubeError(text, status=status, reason=reason)

    # --- objects --------------------------------------------------------------------------

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict | None:
        try:
            return self.request("GET", object_path(api_version, kind, namespace, name))
        except KubeNotFound:
            return None

    def list(self, api_version: str, kind: str, *, label_selector: str = "") -> list[dict]:
        """Every object of a kind, across namespaces."""
        query = {"labelSelector": label_selector} if label_selector else None
        result = self.request("GET", object_path(api_version, kind), query=query)
        items = result.get("items", []) if result else []
        for item in items:
            # Lists leave apiVersion/kind off their items.
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
        return items

    def create(self, obj: dict, *, dry_run: bool = False) -> dict:
        meta = obj["metadata"]
        path = object_path(obj["apiVersion"], obj["kind"], meta.get("namespace", ""))
        return self.request("POST", path, query=_write_query(dry_run), body=obj)

    def replace(self, obj: dict, *, dry_run: bool = False) -> dict:
        """PUT; with metadata.resourceVersion set, a stale object gets a KubeConflict."""
        path = object_path(*ObjectKey.of(obj))
        return self.request("PUT", path, query=_write_query(dry_run), body=obj)

    def apply(
        self, obj: dict, *, field_manager: str, force: bool = True, dry_run: bool = False
    ) -> dict:
        """Server-side apply (creates the object when it is missing)."""
        path = object_path(*ObjectKey.of(obj))
        query = {"fieldManager": field_manager, **_write_query(dry_run)}
        if force:
            query["force"] = "true"
        # Serialized here (JSON is YAML): the client then passes the bytes through instead of
        # walking the object to sanitize it and encoding it again (the bulk of every sync).
        body = json.dumps(obj, separators=(",", ":")).encode()
        return self.request(
            "PATCH", path, query=query, body=body, content_type="application/apply-patch+yaml"
        )

    def patch_json(
        self,
        api_version: str,
        kind: str,
        namespace: str,
        name: str,
        operations: "list[dict]",
        *,
        field_manager: str,
        dry_run: bool = False,
    ) -> dict:
        """JSON patch (RFC 6902): a `test` operation on /metadata/resourceVersion makes it
        conditional on the object being unchanged since it was read."""
        path = object_path(api_version, kind, namespace, name)
        query = {"fieldManager": field_manager, **_write_query(dry_run)}
        return self.request(
            "PATCH", path, query=query, body=operations, content_type="application/json-patch+json"
        )

    def delete(
        self,
        api_version: str,
        kind: str,
        namespace: str,
        name: str,
        *,
        resource_version: str | None = None,
        dry_run: bool = False,
    ) -> None:
        """DELETE; with `resource_version`, an object changed since it was read gets a
        KubeConflict instead of being deleted."""
        path = object_path(api_version, kind, namespace, name)
        body = None
        if resource_version:
            body = {
                "apiVersion": "v1",
                "kind": "DeleteOptions",
                "preconditions": {"resourceVersion": resource_version},
            }
        self.request("DELETE", path, query=_write_query(dry_run), body=body)

    def served_resources(self, api_version: str) -> set[str] | None:
        """Discovery: the resource names the API server serves in a group-version (e.g.
        {"clusterqueues", ...} for kueue.x-k8s.io/v1beta2), or None when it serves none."""
        path = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        try:
            result = self.request("GET", path)
        except KubeNotFound:
            return None
        return {r.get("name", "") for r in (result or {}).get("resources", [])}


def _write_query(dry_run: bool) -> dict[str, str]:
    query = {"fieldValidation": "Strict"}
    if dry_run:
        query["dryRun"] = "All"
    return query


def client_for_cluster(cluster, *, timeout: float = 15.0) -> KubeClient:
    """Client for a Cluster row: sandbox URL, kubeconfig path + context, or in-cluster."""
    from django.conf import settings

    if cluster.connection == "sandbox":
        return KubeClient.for_url(
            cluster.sandbox_url or settings.KUBE_SANDBOX_URL,
            token=sandbox_token(),
            ca_file=sandbox_ca_file(),
            timeout=timeout,
        )
    if cluster.connection == "kubeconfig":
        if not os.path.isfile(cluster.kubeconfig_path):
            raise KubeConfigError(
                f"kubeconfig {cluster.kubeconfig_path} of cluster {cluster.name} not found"
            )
        try:
            return KubeClient.from_kubeconfig(
                cluster.kubeconfig_path, cluster.kubeconfig_context or None, timeout=timeout
            )
        except k8s_config.ConfigException as exc:
            # The message names the file or context, never the credentials in it.
            raise KubeConfigError(f"kubeconfig of cluster {cluster.name}: {exc}") from None
    return KubeClient.in_cluster(timeout=timeout)


def sandbox_token() -> str | None:
    """The sandbox API's bearer token, read from ``KUBE_SANDBOX_TOKEN_FILE`` (None when unset).

    Read at each connection (``make run`` writes a new one per run); never stored or logged.
    """
    from django.conf import settings

    path = settings.KUBE_SANDBOX_TOKEN_FILE
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            token = fh.read().strip()
    except OSError as exc:
        raise KubeConfigError(f"sandbox token file {path}: {exc.strerror}") from None
    if not token:
        raise KubeConfigError(f"sandbox token file {path} is empty")
    return token


def sandbox_ca_file() -> str | None:
    """The CA certificate the sandbox API's HTTPS certificate chains to, from
    ``KUBE_SANDBOX_CA_FILE`` (None when unset: plain HTTP, or the system's trusted CAs)."""
    from django.conf import settings

    path = settings.KUBE_SANDBOX_CA_FILE
    if not path:
        return None
    if not os.path.isfile(path):
        raise KubeConfigError(f"sandbox CA file {path} not found")
    return path
