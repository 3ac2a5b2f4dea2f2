"""Strict validation of Kubernetes objects against the real schemas in ``kubesandbox/openapi``.

The schema directory holds the Kubernetes 1.35 OpenAPI v3 documents of the core groups the
portal writes to and the CRDs of Volcano and Kueue (see its SOURCES.md). This module loads them
lazily (once per process), closes every object schema that lists ``properties`` (the API server's
``fieldValidation=Strict``: unknown fields are errors), checks quantities with the Kubernetes
quantity grammar (the core ``Quantity`` schema is only ``oneOf [string, number]``), and checks
object names, label keys and label values the way the API server does.

It has no Django dependency: the Kubernetes API test server (this package) is built on it, and
the tests validate every rendered object with it.
"""

from __future__ import annotations

import copy
import json
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import yaml
from jsonschema import Draft4Validator, ValidationError, validators
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT4

QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
QUANTITY_RE = re.compile(QUANTITY_PATTERN)
QUANTITY_MESSAGE = f"quantities must match the regular expression '{QUANTITY_PATTERN}'"

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
_DNS1123_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN_RE = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_QUALIFIED_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

_CORE_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_CORE_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_BASE_URI = "https://sandbox.invalid/openapi/v3/"
# Kinds whose names are path segments rather than DNS subdomains (rbac's ValidateRBACName).
_PATH_SEGMENT_NAME_GROUPS = {"rbac.authorization.k8s.io"}


class FieldError(NamedTuple):
    """One validation error; ``field`` is a Kubernetes field path such as ``spec.hard[cpu]``."""

    field: str
    message: str


def bad_value(value: Any) -> str:
    """A value as an API server error shows it: strings quoted as Go's ``%q``, numbers and
    booleans bare, anything else as JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, separators=(",", ":"))


@dataclass(frozen=True)
class KindInfo:
    """What the API knows of one kind in one group-version."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    subresources: frozenset[str] = frozenset()
    # CRD additionalPrinterColumns (name, type, jsonPath); empty for core kinds.
    printer_columns: tuple[tuple[str, str, str], ...] = ()
    is_crd: bool = False
    # Whether DELETE answers with the deleted object (else a Status), per the OpenAPI document.
    delete_returns_object: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version(self) -> str:
        """The OpenAPI v3 document key: ``api/v1`` or ``apis/<group>/<version>``."""
        return f"apis/{self.group}/{self.version}" if self.group else f"api/{self.version}"


class SchemaDirNotFound(RuntimeError):
    """No schema directory exists at any of the places looked at."""


def schema_dir() -> Path:
    """The directory holding ``kubernetes-1.35/``, ``volcano/`` and ``kueue/``: the copy kept
    beside this module, or ``KUBE_SCHEMA_DIR`` when set (e.g. the full upstream set)."""
    env = os.environ.get("KUBE_SCHEMA_DIR", "").strip()
    # An explicit choice is not second-guessed: no fallback when it is wrong.
    candidate = Path(env) if env else Path(__file__).resolve().parent / "openapi"
    if candidate.is_dir():
        return candidate
    raise SchemaDirNotFound(
        f"no Kubernetes schema directory at {candidate}" + ("" if env else "; set KUBE_SCHEMA_DIR")
    )


# --------------------------------------------------------------------------------------------
# Loading


@dataclass
class _Catalog:
    """Everything parsed from the schema directory, built once per process."""

    kinds: dict[tuple[str, str], KindInfo] = field(default_factory=dict)
    # group-version key ("api/v1", "apis/kueue.x-k8s.io/v1beta2") -> raw OpenAPI v3 document
    documents: dict[str, dict[str, Any]] = field(default_factory=dict)
    # (apiVersion, kind) -> (document URI, strict schema to validate against)
    roots: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    registry: Registry = field(default_factory=Registry)
    # (apiVersion, kind) -> the CRD's raw openAPIV3Schema (for its CEL rules and defaults)
    crd_raw: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)


_catalog: _Catalog | None = None
_catalog_lock = threading.Lock()
_validators: dict[tuple[str, str], Any] = {}


def _gv_key_from_filename(name: str) -> str:
    # "api__v1_openapi.json" -> "api/v1"; "apis__policy__v1_openapi.json" -> "apis/policy/v1"
    return name.removesuffix("_openapi.json").replace("__", "/")


def _strict(node: Any) -> Any:
    """Copy of a schema with every object schema that lists ``properties`` closed."""
    if isinstance(node, list):
        return [_strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _strict(value) for key, value in node.items()}
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def _core_kinds(doc: dict[str, Any]) -> Iterator[KindInfo]:
    paths: dict[str, Any] = doc.get("paths", {})
    for path, ops in paths.items():
        get = ops.get("get") or {}
        if not path.endswith("/{name}") or get.get("x-kubernetes-action") != "get":
            continue
        gvk = get.get("x-kubernetes-group-version-kind")
        if not gvk:
            continue
        segments = path.split("/")
        plural = segments[-2]
        subresources = frozenset(
            sub
            for sub in ("status", "scale", "resize")
            if f"{path}/{sub}" in paths and "put" in paths[f"{path}/{sub}"]
        )
        delete = (ops.get("delete") or {}).get("responses", {}).get("200", {})
        delete_schema = delete.get("content", {}).get("application/json", {}).get("schema", {})
        yield KindInfo(
            group=gvk["group"],
            version=gvk["version"],
            kind=gvk["kind"],
            plural=plural,
            namespaced="{namespace}" in path,
            singular=gvk["kind"].lower(),
            subresources=subresources,
            delete_returns_object=delete_schema.get("$ref", "").endswith("." + gvk["kind"]),
        )


def _load_core(catalog: _Catalog, directory: Path) -> None:
    core_dirs = sorted(directory.glob("kubernetes-*"))
    if not core_dirs:
        raise SchemaDirNotFound(f"no kubernetes-*/ directory in {directory}")
    for file in sorted(core_dirs[-1].glob("*_openapi.json")):
        gv_key = _gv_key_from_filename(file.name)
        with file.open(encoding="utf-8") as fh:
            doc = json.load(fh)
        catalog.documents[gv_key] = doc
        strict = {"components": {"schemas": _strict(doc["components"]["schemas"])}}
        schemas = strict["components"]["schemas"]
        if _CORE_QUANTITY in schemas:
            schemas[_CORE_QUANTITY] = {"x-kubernetes-quantity": True}
        uri = _BASE_URI + gv_key
        catalog.registry = catalog.registry.with_resource(uri, Resource(strict, DRAFT4))
        by_gvk: dict[tuple[str, str], str] = {}
        for name, schema in doc["components"]["schemas"].items():
            for gvk in schema.get("x-kubernetes-group-version-kind", []):
                api_version = f"{gvk['group']}/{gvk['version']}" if gvk["group"] else gvk["version"]
                by_gvk.setdefault((api_version, gvk["kind"]), name)
        for info in _core_kinds(doc):
            key = (info.api_version, info.kind)
            if key in catalog.kinds or key not in by_gvk:
                continue
            catalog.kinds[key] = info
            catalog.roots[key] = {"$ref": f"{uri}#/components/schemas/{by_gvk[key]}"}


def _crd_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*.yaml") if not p.parts[-2].startswith("kubernetes-"))


def _load_crds(catalog: _Catalog, directory: Path) -> dict[str, dict[str, Any]]:
    """Register the CRD kinds; returns the raw schemas by group-version key and kind."""
    raw_by_gv: dict[str, dict[str, Any]] = {}
    object_meta_ref = f"{_BASE_URI}api/v1#/components/schemas/{_CORE_OBJECT_META}"
    for file in _crd_files(directory):
        with file.open(encoding="utf-8") as fh:
            for crd in yaml.safe_load_all(fh):
                if not crd or crd.get("kind") != "CustomResourceDefinition":
                    continue
                spec = crd["spec"]
                names = spec["names"]
                for version in spec["versions"]:
                    if not version.get("served", True):
                        continue
                    info = KindInfo(
                        group=spec["group"],
                        version=version["name"],
                        kind=names["kind"],
                        plural=names["plural"],
                        namespaced=spec["scope"] == "Namespaced",
                        singular=names.get("singular", names["kind"].lower()),
                        short_names=tuple(names.get("shortNames", ())),
                        subresources=frozenset(version.get("subresources", {})),
                        printer_columns=tuple(
                            (col["name"], col.get("type", "string"), col["jsonPath"])
                            for col in version.get("additionalPrinterColumns", ())
                        ),
                        is_crd=True,
                        delete_returns_object=True,
                    )
                    raw = version["schema"]["openAPIV3Schema"]
                    strict = _strict(raw)
                    strict.setdefault("properties", {})["metadata"] = {"$ref": object_meta_ref}
                    key = (info.api_version, info.kind)
                    catalog.kinds[key] = info
                    catalog.roots[key] = strict
                    catalog.crd_raw[key] = raw
                    raw_by_gv.setdefault(info.group_version, {})[info.kind] = raw
    return raw_by_gv


def _catalog_now() -> _Catalog:
    global _catalog
    if _catalog is None:
        with _catalog_lock:
            if _catalog is None:
                directory = schema_dir()
                catalog = _Catalog()
                _load_core(catalog, directory)
                for gv_key, raw_by_kind in _load_crds(catalog, directory).items():
                    catalog.documents[gv_key] = _crd_document(catalog, gv_key, raw_by_kind)
                _catalog = catalog
    return _catalog


# --------------------------------------------------------------------------------------------
# OpenAPI v3 documents for CRD group-versions (what kube-apiserver publishes for CRDs)


def _reverse_domain(group: str) -> str:
    return ".".join(reversed(group.split(".")))


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            yield ref.rsplit("/", 1)[-1]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def _closure(schemas: dict[str, Any], roots: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in out or name not in schemas:
            continue
        out[name] = schemas[name]
        todo.extend(_refs(schemas[name]))
    return out


def _crd_document(catalog: _Catalog, gv_key: str, raw_by_kind: dict[str, Any]) -> dict[str, Any]:
    _, group, version = gv_key.split("/")
    core = catalog.documents["api/v1"]["components"]["schemas"]
    meta = "io.k8s.apimachinery.pkg.apis.meta.v1."
    schemas = _closure(
        core, [meta + "ObjectMeta", meta + "ListMeta", meta + "Status", meta + "Patch"]
    )
    paths: dict[str, Any] = {}
    prefix = _reverse_domain(group) + "." + version + "."
    params = [
        {"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
        for name in ("dryRun", "fieldManager", "fieldValidation")
    ]
    for kind, raw in raw_by_kind.items():
        info = catalog.kinds[(f"{group}/{version}", kind)]
        gvk = [{"group": group, "version": version, "kind": kind}]
        schema = copy.deepcopy(raw)
        schema.setdefault("properties", {})["metadata"] = {
            "allOf": [{"$ref": f"#/components/schemas/{meta}ObjectMeta"}],
            "description": "Standard object's metadata.",
        }
        schema["x-kubernetes-group-version-kind"] = gvk
        schemas[prefix + kind] = schema
        schemas[prefix + kind + "List"] = {
            "type": "object",
            "required": ["items"],
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "items": {
                    "type": "array",
                    "items": {"allOf": [{"$ref": f"#/components/schemas/{prefix}{kind}"}]},
                },
                "metadata": {"allOf": [{"$ref": f"#/components/schemas/{meta}ListMeta"}]},
            },
            "x-kubernetes-group-version-kind": [{**gvk[0], "kind": kind + "List"}],
        }
        ns = "/namespaces/{namespace}" if info.namespaced else ""
        base = f"/apis/{group}/{version}{ns}/{info.plural}"
        body = {
            "content": {
                "application/json": {"schema": {"$ref": f"#/components/schemas/{prefix}{kind}"}}
            },
            "required": True,
        }
        patch_body = {
            "content": {
                ctype: {"schema": {"$ref": f"#/components/schemas/{meta}Patch"}}
                for ctype in (
                    "application/apply-patch+yaml",
                    "application/json-patch+json",
                    "application/merge-patch+json",
                )
            },
            "required": True,
        }

        def op(
            action: str,
            op_id: str,
            request_body: dict[str, Any] | None = None,
            gvk: dict[str, str] = gvk[0],
        ) -> dict[str, Any]:
            out: dict[str, Any] = {
                "operationId": op_id,
                "parameters": params if action in ("post", "put", "patch") else [],
                "responses": {"200": {"description": "OK"}},
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
            }
            if request_body:
                out["requestBody"] = request_body
            return out

        paths[base] = {
            "get": op("list", f"list{kind}"),
            "post": op("post", f"create{kind}", body),
        }
        paths[base + "/{name}"] = {
            "get": op("get", f"read{kind}"),
            "put": op("put", f"replace{kind}", body),
            "patch": op("patch", f"patch{kind}", patch_body),
            "delete": op("delete", f"delete{kind}"),
        }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes CRD Swagger", "version": "v0.1.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }


# --------------------------------------------------------------------------------------------
# Public lookups


def known_kinds() -> dict[tuple[str, str], KindInfo]:
    """(apiVersion, kind) -> KindInfo for every kind of the core documents and the CRDs."""
    return _catalog_now().kinds


def crd_schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> raw ``openAPIV3Schema`` of every served CRD version."""
    return _catalog_now().crd_raw


def openapi_documents() -> dict[str, dict[str, Any]]:
    """Group-version key (``api/v1``, ``apis/kueue.x-k8s.io/v1beta2``) -> OpenAPI v3 document."""
    return _catalog_now().documents


def openapi_document(group_version: str) -> dict[str, Any] | None:
    """The OpenAPI v3 document served at ``/openapi/v3/<group_version>``, or None."""
    return _catalog_now().documents.get(group_version.strip("/"))


# --------------------------------------------------------------------------------------------
# Validation


def _quantity_keyword(
    validator: Any, enabled: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not enabled:
        return
    if isinstance(instance, bool) or not isinstance(instance, (str, int, float)):
        yield ValidationError(f"must be of type string: {_show(instance)}", validator="type")
    elif isinstance(instance, str) and not QUANTITY_RE.match(instance):
        yield ValidationError(QUANTITY_MESSAGE)


_KubeValidator = validators.extend(Draft4Validator, {"x-kubernetes-quantity": _quantity_keyword})


def _validator_for(key: tuple[str, str]) -> Any:
    compiled = _validators.get(key)
    if compiled is None:
        catalog = _catalog_now()
        compiled = _KubeValidator(catalog.roots[key], registry=catalog.registry)
        _validators[key] = compiled
    return compiled


def _show(value: Any) -> str:
    if isinstance(value, dict):
        return '"object"'
    if isinstance(value, list):
        return '"array"'
    return json.dumps(value)


def format_path(parts: list[tuple[str, Any]]) -> str:
    """Kubernetes field path from ("field", name) / ("key", map key) / ("index", i) parts."""
    out = ""
    for kind, value in parts:
        if kind == "field":
            out = f"{out}.{value}" if out else str(value)
        else:
            out += f"[{value}]"
    return out


def _error_parts(error: ValidationError) -> list[tuple[str, Any]]:
    """Walk the schema path beside the instance path to tell struct fields from map keys."""
    instance_path = list(error.absolute_path)
    schema_path = list(error.absolute_schema_path)[:-1]  # the last entry is the failing keyword
    parts: list[tuple[str, Any]] = []
    i = j = 0
    while j < len(schema_path) and i < len(instance_path):
        keyword = schema_path[j]
        if keyword == "properties":
            parts.append(("field", instance_path[i]))
            i += 1
            j += 2
        elif keyword == "additionalProperties":
            parts.append(("key", instance_path[i]))
            i += 1
            j += 1
        elif keyword == "items":
            parts.append(("index", instance_path[i]))
            i += 1
            j += 1
        elif keyword in ("allOf", "anyOf", "oneOf"):
            j += 2
        else:
            j += 1
    for rest in instance_path[i:]:
        parts.append(("index", rest) if isinstance(rest, int) else ("field", rest))
    return parts


def _messages(error: ValidationError) -> Iterator[FieldError]:
    parts = _error_parts(error)
    where = format_path(parts)
    value = error.instance
    keyword = error.validator
    if keyword == "additionalProperties" and isinstance(value, dict):
        allowed = set(error.schema.get("properties", {}))
        for extra in sorted(k for k in value if k not in allowed):
            path = format_path([*parts, ("field", extra)])
            yield FieldError(path, f'unknown field "{path}"')
        return
    if keyword == "required":
        missing = re.findall(r"^'(.*)' is a required property$", error.message)
        name = missing[0] if missing else str(error.validator_value)
        yield FieldError(format_path([*parts, ("field", name)]), "Required value")
        return
    if keyword == "x-kubernetes-quantity":
        yield FieldError(where, f"Invalid value: {_show(value)}: {error.message}")
        return
    if keyword == "type":
        expected = error.validator_value
        if isinstance(expected, list):
            expected = " or ".join(expected)
        yield FieldError(where, f"Invalid value: {_show(value)}: must be of type {expected}")
        return
    if keyword == "enum":
        supported = ", ".join(json.dumps(v) for v in error.validator_value)
        yield FieldError(where, f"Unsupported value: {_show(value)}: supported values: {supported}")
        return
    if keyword == "pattern":
        if error.validator_value == QUANTITY_PATTERN:
            yield FieldError(where, f"Invalid value: {_show(value)}: {QUANTITY_MESSAGE}")
        else:
            yield FieldError(
                where, f"Invalid value: {_show(value)}: must match '{error.validator_value}'"
            )
        return
    if keyword in ("maxLength", "maxItems", "maxProperties"):
        yield FieldError(where, f"Too long: may not be more than {error.validator_value}")
        return
    if keyword in ("anyOf", "oneOf"):
        # int-or-string and friends: report the most specific sub-error when there is one.
        best = max(error.context or [], key=lambda e: len(e.absolute_path), default=None)
        if best is not None and best.validator not in ("type",):
            yield from _messages(best)
            return
    yield FieldError(where, f"Invalid value: {_show(value)}: {error.message}")


def _strip_nulls(value: Any) -> Any:
    # The API server decodes JSON null as "unset"; do the same before validating.
    if isinstance(value, dict):
        return {k: _strip_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_strip_nulls(v) for v in value]
    return value


def strip_nulls(value: Any) -> Any:
    """Copy of ``value`` without null map values, as the API server decodes them."""
    return _strip_nulls(value)


def _name_errors(name: str, field_path: str, info: KindInfo) -> list[FieldError]:
    if info.group in _PATH_SEGMENT_NAME_GROUPS:
        if name in (".", "..") or "/" in name or "%" in name:
            return [FieldError(field_path, f'Invalid value: "{name}": may not contain "/" or "%"')]
        return []
    if info.kind == "Namespace":
        if len(name) > DNS1123_LABEL_MAX or not _DNS1123_LABEL_RE.match(name):
            return [
                FieldError(
                    field_path,
                    f'Invalid value: "{name}": a lowercase RFC 1123 label must consist of lower '
                    "case alphanumeric characters or '-', and must start and end with an "
                    "alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
                    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
                )
            ]
        return []
    if len(name) > DNS1123_SUBDOMAIN_MAX or not _DNS1123_SUBDOMAIN_RE.match(name):
        return [
            FieldError(
                field_path,
                f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of lower '
                "case alphanumeric characters, '-' or '.', and must start and end with an "
                "alphanumeric character (e.g. 'example.com', regex used for validation is "
                "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            )
        ]
    return []


def _qualified_name_error(key: str) -> str | None:
    prefix, slash, name = key.rpartition("/")
    if slash and (
        not prefix or len(prefix) > DNS1123_SUBDOMAIN_MAX or not _DNS1123_SUBDOMAIN_RE.match(prefix)
    ):
        return "prefix part must be a lowercase RFC 1123 subdomain"
    if not name:
        return "name part must be non-empty"
    if len(name) > DNS1123_LABEL_MAX:
        return "name part must be no more than 63 characters"
    if not _QUALIFIED_NAME_RE.match(name):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
            "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
            "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
        )
    return None


def qualified_name_error(key: str) -> str | None:
    """Why ``key`` is not a Kubernetes qualified name (``prefix/name``), or None."""
    return _qualified_name_error(key)


def _metadata_errors(meta: dict[str, Any], info: KindInfo) -> list[FieldError]:
    errors: list[FieldError] = []
    name = meta.get("name")
    if isinstance(name, str) and name:
        errors += _name_errors(name, "metadata.name", info)
    elif not meta.get("generateName"):
        errors.append(
            FieldError("metadata.name", "Required value: name or generateName is required")
        )
    namespace = meta.get("namespace")
    if (
        info.namespaced
        and isinstance(namespace, str)
        and namespace
        and (len(namespace) > DNS1123_LABEL_MAX or not _DNS1123_LABEL_RE.match(namespace))
    ):
        errors.append(
            FieldError(
                "metadata.namespace", f'Invalid value: "{namespace}": must be a DNS-1123 label'
            )
        )
    labels = meta.get("labels")
    if isinstance(labels, dict):
        for key, value in labels.items():
            problem = _qualified_name_error(key)
            if problem:
                errors.append(FieldError("metadata.labels", f'Invalid value: "{key}": {problem}'))
            if isinstance(value, str) and (
                len(value) > DNS1123_LABEL_MAX or not _LABEL_VALUE_RE.match(value)
            ):
                errors.append(
                    FieldError(
                        "metadata.labels",
                        f'Invalid value: "{value}": a valid label must be an empty string or '
                        "consist of alphanumeric characters, '-', '_' or '.', and must start and "
                        "end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
                        "'12345', regex used for validation is "
                        "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?'), and must be no more "
                        "than 63 characters",
                    )
                )
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        for key in annotations:
            problem = _qualified_name_error(key.lower())
            if problem:
                errors.append(
                    FieldError("metadata.annotations", f'Invalid value: "{key}": {problem}')
                )
        size = sum(len(k) + len(v) for k, v in annotations.items() if isinstance(v, str))
        if size > 256 * 1024:
            errors.append(
                FieldError("metadata.annotations", "Too long: must have at most 262144 bytes")
            )
    return errors


def validate_object(obj: dict[str, Any]) -> list[FieldError]:
    """All schema, name and label errors of ``obj``; an empty list when it is valid.

    The schema is picked from ``apiVersion`` and ``kind``; unknown fields are errors (strict).
    """
    if not isinstance(obj, dict):
        return [FieldError("", "Invalid value: the object must be a JSON/YAML map")]
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not api_version or not isinstance(api_version, str):
        return [FieldError("apiVersion", "Required value: apiVersion must be set")]
    if not kind or not isinstance(kind, str):
        return [FieldError("kind", "Required value: kind must be set")]
    info = known_kinds().get((api_version, kind))
    if info is None:
        return [
            FieldError(
                "kind",
                f'Invalid value: "{kind}": no kind "{kind}" is registered for version '
                f'"{api_version}"',
            )
        ]
    obj = _strip_nulls(obj)
    errors: list[FieldError] = []
    seen: set[FieldError] = set()
    for error in _validator_for((api_version, kind)).iter_errors(obj):
        for message in _messages(error):
            if message not in seen:
                seen.add(message)
                errors.append(message)
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        errors += [e for e in _metadata_errors(meta, info) if e not in seen]
    elif meta is None:
        errors.append(
            FieldError("metadata.name", "Required value: name or generateName is required")
        )
    return sorted(errors, key=lambda e: e.field)
