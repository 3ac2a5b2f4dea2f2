"""A Kubernetes API test server ("the sandbox") for the objects the portal writes.

It behaves like kube-apiserver over real HTTP for Namespaces, ResourceQuotas, LimitRanges,
ConfigMaps, Pods, ServiceAccounts, PriorityClasses, RBAC, PodDisruptionBudgets, Volcano Queues and
Kueue ClusterQueues/LocalQueues/ResourceFlavors/Cohorts, ValidatingAdmissionPolicies and their
bindings: strict validation against the real schemas, resourceVersion and 409 on stale writes,
server-side apply with managed fields, dry-run, discovery and OpenAPI v3 good enough for the
official Python client and kubectl, and fault injection for tests. Pure stdlib +
jsonschema/referencing/yaml + cel-python (no Django).

It refuses what a real cluster refuses, with the real error shapes: Kubernetes' own validation of
the built-in kinds (``core_validation``), the Priority admission of pods, the CRDs' CEL rules
(``celrules``), Kueue's ClusterQueue and Cohort webhooks (``kueue``), Volcano's queue webhook
(``volcano``), and new objects in a Terminating namespace. It enforces
ValidatingAdmissionPolicies on writes (``admission_policies``) and serves ``pods/resize``. What
it does not imitate (ResourceQuota admission, for one) is listed, against the real control
plane, in ``tests/real/test_sandbox_agreement.py``.
``omit_api_versions`` serves a cluster without a scheduler's CRDs, or with an older Kueue.
``token`` requires a bearer token; ``tls_dir`` (or ``tls=True``) serves HTTPS with a CA of its own
(``tls``), which the kubeconfig it writes carries.

    from kubesandbox import SandboxServer
    server = SandboxServer(port=0).start()
    server.write_kubeconfig("/tmp/kubeconfig")
    ...
    server.stop()
"""

from kubesandbox.faults import FAULT_KINDS, WRITE_METHODS, FaultRule, Faults, Stats
from kubesandbox.server import SandboxServer

__all__ = ["FAULT_KINDS", "WRITE_METHODS", "FaultRule", "Faults", "SandboxServer", "Stats"]
