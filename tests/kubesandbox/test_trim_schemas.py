"""The schema copy in the repository: self-contained, trimmed, and what the script produces."""

import json
from pathlib import Path

import pytest

from kubesandbox import schemas
from kubesandbox.trim_schemas import KEPT_KINDS, regenerate, trim_document
from quotas.kube.client import KINDS

REPO = Path(__file__).resolve().parents[2]
COPY = REPO / "kubesandbox" / "openapi"


def test_default_schema_dir_is_the_copy_in_the_repository(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("KUBE_SCHEMA_DIR", raising=False)
    assert schemas.schema_dir() == COPY
    assert REPO in schemas.schema_dir().parents


def test_every_kind_the_portal_reads_or_writes_is_in_the_copy():
    known = schemas.known_kinds()
    missing = [key for key in KINDS if key not in known]
    assert missing == []


def test_the_copy_is_what_the_script_makes_of_it(tmp_path: Path):
    # Trimming is a fixed point: regenerating from the copy gives the copy back, byte for byte.
    written = regenerate(COPY, tmp_path)
    assert written
    for name in written:
        assert (tmp_path / name).read_bytes() == (COPY / name).read_bytes(), name


def test_trim_keeps_the_kept_kinds_and_what_they_reference_only():
    doc = {
        "openapi": "3.0.0",
        "paths": {
            "/api/v1/": {"get": {"operationId": "getCoreV1APIResources"}},
            "/api/v1/namespaces/{name}": {
                "get": {
                    "x-kubernetes-group-version-kind": {
                        "group": "",
                        "version": "v1",
                        "kind": "Namespace",
                    },
                    "responses": {"200": {"$ref": "#/components/schemas/ns"}},
                }
            },
            "/api/v1/widgets/{name}": {
                "get": {
                    "x-kubernetes-group-version-kind": {
                        "group": "",
                        "version": "v1",
                        "kind": "Widget",
                    },
                    "responses": {"200": {"$ref": "#/components/schemas/widget"}},
                }
            },
        },
        "components": {
            "schemas": {
                "ns": {"properties": {"spec": {"$ref": "#/components/schemas/nsspec"}}},
                "nsspec": {"type": "object"},
                "widget": {"properties": {"x": {"$ref": "#/components/schemas/unused"}}},
                "unused": {"type": "string"},
            }
        },
    }
    assert ("", "Namespace") in KEPT_KINDS
    trimmed = trim_document(doc)
    assert trimmed is not None
    assert set(trimmed["paths"]) == {"/api/v1/", "/api/v1/namespaces/{name}"}
    assert set(trimmed["components"]["schemas"]) == {"ns", "nsspec"}
    # The input is left as it was.
    assert "widget" in doc["components"]["schemas"]
    assert json.dumps(trimmed)  # still plain JSON
