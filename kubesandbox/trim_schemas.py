"""Regenerate ``kubesandbox/openapi/`` from the full schema set: the Kubernetes 1.35 OpenAPI v3
documents trimmed to the kinds the portal writes, reads or deploys, and the Volcano and Kueue
CRDs as they are.

    python -m kubesandbox.trim_schemas SOURCE_DIR [--out kubesandbox/openapi]

SOURCE_DIR holds ``kubernetes-1.35/*_openapi.json``, ``volcano/*.yaml`` and ``kueue/*.yaml`` (the
layout of the upstream copies listed in ``openapi/SOURCES.md``). A core document keeps the API
paths of the kept kinds (and the group's resource list) and every component schema those paths
and kinds reach through ``$ref``; everything else in the document is dropped. The output is
deterministic (sorted keys), so a regeneration shows as a clean diff.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

# (group, kind) of every core kind the sandbox must serve: what the portal writes (quota
# objects, admission policies), reads (pods, events, nodes for usage and capacity) and what its
# own deployment manifests contain (validated in tests).
KEPT_KINDS = frozenset(
    {
        ("", "Namespace"),
        ("", "ResourceQuota"),
        ("", "LimitRange"),
        ("", "ConfigMap"),
        ("", "Pod"),
        ("", "PodTemplate"),
        ("", "Event"),
        ("", "Node"),
        ("", "Service"),
        ("", "ServiceAccount"),
        ("", "Secret"),
        ("scheduling.k8s.io", "PriorityClass"),
        ("rbac.authorization.k8s.io", "Role"),
        ("rbac.authorization.k8s.io", "RoleBinding"),
        ("rbac.authorization.k8s.io", "ClusterRole"),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
        ("policy", "PodDisruptionBudget"),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
        # admissionregistration.k8s.io/v1 only from Kubernetes 1.36: the 1.36 schemas of these
        # two are merged into the 1.35 document (see openapi/SOURCES.md).
        ("admissionregistration.k8s.io", "MutatingAdmissionPolicy"),
        ("admissionregistration.k8s.io", "MutatingAdmissionPolicyBinding"),
    }
)
CRD_DIRS = ("volcano", "kueue")


def _refs(node: Any) -> set[str]:
    found: set[str] = set()
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            ref = item.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
                found.add(ref.rsplit("/", 1)[-1])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _kept_path(ops: dict[str, Any]) -> bool | None:
    """True/False for a path of a kind (kept or not); None for a path of no kind."""
    kinds = [
        op.get("x-kubernetes-group-version-kind")
        for op in ops.values()
        if isinstance(op, dict) and op.get("x-kubernetes-group-version-kind")
    ]
    if not kinds:
        return None
    return any((gvk["group"], gvk["kind"]) in KEPT_KINDS for gvk in kinds)


def trim_document(doc: dict[str, Any]) -> dict[str, Any] | None:
    """The document reduced to the kept kinds, or None when it has none of them."""
    schemas = doc["components"]["schemas"]
    paths = {}
    for path, ops in doc.get("paths", {}).items():
        kept = _kept_path(ops)
        if kept:
            paths[path] = ops
    if not paths:
        return None
    for path, ops in doc.get("paths", {}).items():
        if _kept_path(ops) is None and path.rstrip("/").count("/") <= 3:
            paths[path] = ops  # the group-version's resource list (discovery)
    roots = _refs(paths)
    for name, schema in schemas.items():
        for gvk in schema.get("x-kubernetes-group-version-kind", []):
            if (gvk["group"], gvk["kind"]) in KEPT_KINDS:
                roots.add(name)
    kept: dict[str, Any] = {}
    todo = sorted(roots)
    while todo:
        name = todo.pop()
        if name in kept or name not in schemas:
            continue
        kept[name] = schemas[name]
        todo.extend(_refs(schemas[name]) - kept.keys())
    return {**doc, "paths": paths, "components": {**doc["components"], "schemas": kept}}


def regenerate(source: Path, out: Path) -> list[str]:
    """Write the trimmed copy to ``out``; returns the files written (relative to ``out``)."""
    core_dirs = sorted(source.glob("kubernetes-*"))
    if not core_dirs:
        raise SystemExit(f"no kubernetes-*/ directory in {source}")
    written = []
    core = core_dirs[-1]
    (out / core.name).mkdir(parents=True, exist_ok=True)
    for file in sorted(core.glob("*_openapi.json")):
        trimmed = trim_document(json.loads(file.read_text(encoding="utf-8")))
        if trimmed is None:
            continue
        target = out / core.name / file.name
        target.write_text(
            json.dumps(trimmed, sort_keys=True, separators=(",", ":")) + "\n", encoding="utf-8"
        )
        written.append(f"{core.name}/{file.name}")
    for name in CRD_DIRS:
        (out / name).mkdir(parents=True, exist_ok=True)
        for file in sorted((source / name).glob("*.yaml")):
            shutil.copyfile(file, out / name / file.name)
            written.append(f"{name}/{file.name}")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kubesandbox.trim_schemas")
    parser.add_argument("source", type=Path, help="directory of the full schema set")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parent / "openapi", help="target"
    )
    options = parser.parse_args(argv)
    for name in regenerate(options.source, options.out):
        print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
