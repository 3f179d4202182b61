"""Validate Kubernetes manifests strictly; run with .venv-dist's Python (make venv-dist).

    python validate_manifests.py FILE... -> one JSON line per document:
    {"file", "kind", "name", "ok", "checked_by", "errors"}

Kinds of Kubernetes itself are checked against the JSON schema of Kubernetes KUBERNETES_VERSION
that the kubernetes-validate package ships, in strict mode: a property the API does not define
(a misspelt field) is an error, as are wrong types and missing required fields.

KServe's kinds (serving.kserve.io) have no schema in any package; the kserve Python SDK ships
the API's generated models instead (openapi_types and attribute_map of every object, generated
from the same Go types as the CRD). They are walked here the same strict way: every key must be
a field of its object, and values must have the field's type (objects, lists, maps, strings,
integers, booleans), down into the Kubernetes objects they embed (V1Container and friends, from
the kubernetes client's models). Required fields and enum values are not known to those models
and are not checked; the tests check the values that matter (protocols, model format) by name.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import sys
import types
from typing import Any

import kubernetes.client.models as k8s_models
import kubernetes_validate
import yaml

KUBERNETES_VERSION = "1.30.0"

KSERVE_KINDS = {
    ("serving.kserve.io/v1alpha1", "ServingRuntime"): "V1alpha1ServingRuntime",
    ("serving.kserve.io/v1alpha1", "ClusterServingRuntime"): "V1alpha1ClusterServingRuntime",
    ("serving.kserve.io/v1beta1", "InferenceService"): "V1beta1InferenceService",
}


def kserve_models() -> types.ModuleType:
    """kserve.models without kserve/__init__.py, which imports the whole model server."""
    spec = importlib.util.find_spec("kserve")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("the kserve package is not installed (make venv-dist)")
    package = types.ModuleType("kserve")
    package.__path__ = list(spec.submodule_search_locations)
    sys.modules["kserve"] = package
    return importlib.import_module("kserve.models")


def model_class(name: str, kserve: types.ModuleType) -> type | None:
    return getattr(kserve, name, None) or getattr(k8s_models, name, None)


def walk(value: Any, type_name: str, path: str, kserve: types.ModuleType) -> list[str]:
    """Errors of value against the OpenAPI type name used by the generated models."""
    if type_name == "object":
        return []
    # kserve's models write list[X] and dict(str, X), the kubernetes client's List[X], Dict[str, X].
    if match := re.fullmatch(r"[lL]ist\[(.+)\]", type_name):
        if not isinstance(value, list):
            return [f"{path}: expected a list, got {type(value).__name__}"]
        return [e for i, v in enumerate(value) for e in walk(v, match[1], f"{path}[{i}]", kserve)]
    if match := re.fullmatch(r"dict\(str, (.+)\)|Dict\[str, (.+)\]", type_name):
        if not isinstance(value, dict):
            return [f"{path}: expected a map, got {type(value).__name__}"]
        item_type = match[1] or match[2]
        return [e for k, v in value.items() for e in walk(v, item_type, f"{path}.{k}", kserve)]
    scalars = {"str": (str,), "int": (int,), "float": (int, float), "bool": (bool,)}
    if type_name in scalars:
        ok = isinstance(value, scalars[type_name]) and not (
            type_name != "bool" and isinstance(value, bool)
        )
        return [] if ok else [f"{path}: expected {type_name}, got {value!r}"]
    if type_name == "ResourceQuantity" or type_name.endswith("IntOrString"):
        return [] if isinstance(value, (str, int)) else [f"{path}: not a quantity: {value!r}"]
    cls = model_class(type_name, kserve)
    if cls is None:
        return [f"{path}: no model for type {type_name}"]
    if not isinstance(value, dict):
        return [f"{path}: expected a {type_name} object, got {value!r}"]
    fields = {json_name: attr for attr, json_name in cls.attribute_map.items()}
    errors = []
    for key, item in value.items():
        if key not in fields:
            errors.append(f"{path}.{key}: {type_name} has no field {key!r}")
            continue
        errors += walk(item, cls.openapi_types[fields[key]], f"{path}.{key}", kserve)
    return errors


def check(document: dict, kserve: types.ModuleType) -> tuple[str, list[str]]:
    kind = (document.get("apiVersion"), document.get("kind"))
    if kind in KSERVE_KINDS:
        return "kserve-sdk-models", walk(document, KSERVE_KINDS[kind], "", kserve)
    try:
        kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        where = ".".join(str(p) for p in exc.path)
        return "kubernetes-schema", [f"{where}: {exc.message}"]
    except kubernetes_validate.SchemaNotFoundError as exc:
        return "none", [f"no schema for {kind}: {exc}"]
    return "kubernetes-schema", []


def main(paths: list[str]) -> None:
    kserve = kserve_models()
    for path in paths:
        with open(path) as stream:
            documents = [d for d in yaml.safe_load_all(stream) if d is not None]
        for document in documents:
            checked_by, errors = check(document, kserve)
            report = {
                "file": path,
                "kind": document.get("kind"),
                "name": document.get("metadata", {}).get("name"),
                "ok": not errors,
                "checked_by": checked_by,
                "errors": errors,
                "document": document,
            }
            print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1:])
