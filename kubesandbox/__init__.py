"""A Kubernetes API test server ("the sandbox") for the objects the portal writes.

It behaves like kube-apiserver over real HTTP for Namespaces, ResourceQuotas, LimitRanges,
ConfigMaps, Pods, ServiceAccounts, PriorityClasses, RBAC, PodDisruptionBudgets, Volcano Queues and
Kueue ClusterQueues/LocalQueues/ResourceFlavors/Cohorts: strict validation against the real
schemas, resourceVersion and 409 on stale writes, server-side apply with managed fields, dry-run,
discovery and OpenAPI v3 good enough for the official Python client and kubectl, and fault
injection for tests. Pure stdlib + jsonschema/referencing/yaml (no Django).

    from kubesandbox import SandboxServer
    server = SandboxServer(port=0).start()
    server.write_kubeconfig("/tmp/kubeconfig")
    ...
    server.stop()
"""

from kubesandbox.faults import FAULT_KINDS, WRITE_METHODS, FaultRule, Faults, Stats
from kubesandbox.server import SandboxServer

__all__ = ["FAULT_KINDS", "WRITE_METHODS", "FaultRule", "Faults", "SandboxServer", "Stats"]
