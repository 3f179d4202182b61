"""deploy/kubernetes: every manifest is valid for its kind's API schema (strictly: a field the
API does not have fails) and checkov finds nothing that is neither fixed nor justified."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from deploy_tools import CHECKOV, MANIFESTS, tool, validate

FILES = sorted(MANIFESTS.rglob("*.yaml"))


@pytest.fixture(scope="module")
def reports() -> list[dict]:
    return validate(*FILES)


def test_every_manifest_is_schema_valid(reports: list[dict]) -> None:
    assert {Path(r["file"]) for r in reports} == set(FILES)
    for report in reports:
        assert report["ok"], (report["file"], report["kind"], report["errors"])
        assert report["checked_by"] in ("kubernetes-schema", "kserve-sdk-models"), report


def test_the_recipes_are_all_there(reports: list[dict]) -> None:
    kinds = sorted(r["kind"] for r in reports)
    for kind in ("Deployment", "Service", "HorizontalPodAutoscaler", "ServingRuntime"):
        assert kind in kinds
    assert "InferenceService" in kinds


def _one(reports: list[dict], kind: str) -> dict:
    (report,) = [r for r in reports if r["kind"] == kind]
    return report["document"]


def test_deployment_probes_resources_and_security(reports: list[dict]) -> None:
    pod = _one(reports, "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    assert container["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert set(container["resources"]) == {"requests", "limits"}
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    security = container["securityContext"]
    assert security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security["capabilities"]["drop"] == ["ALL"]
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/models"]["readOnly"] is True
    assert "--model-repository=/models" in container["args"]
    # memfd, not /dev/shm: no shared-memory volume is needed (docs/deployment.md)
    assert "/dev/shm" not in mounts


def test_kserve_runtime_serves_v2_over_http_and_grpc(reports: list[dict]) -> None:
    runtime = _one(reports, "ServingRuntime")["spec"]
    assert runtime["protocolVersions"] == ["v2", "grpc-v2"]
    assert {"name": "python", "version": "1", "autoSelect": True, "priority": 1} in runtime[
        "supportedModelFormats"
    ]
    service = _one(reports, "InferenceService")["spec"]["predictor"]["model"]
    assert service["modelFormat"]["name"] == "python"
    assert service["runtime"] == _one(reports, "ServingRuntime")["metadata"]["name"]


def test_hpa_scales_on_the_adapter_metric(reports: list[dict]) -> None:
    hpa = _one(reports, "HorizontalPodAutoscaler")["spec"]
    (metric,) = hpa["metrics"]
    rules = _one(reports, "ConfigMap")["data"]["config.yaml"]
    assert f"as: {metric['pods']['metric']['name']}" in rules
    assert "nv_inference_queue_duration_us" in rules
    assert hpa["scaleTargetRef"]["name"] == _one(reports, "Deployment")["metadata"]["name"]


@pytest.mark.parametrize(
    ("file", "good", "bad", "error"),
    [
        ("pybackend.yaml", "readinessProbe:", "readinesProbe:", "'readinesProbe' was unexpected"),
        ("hpa.yaml", "minReplicas: 2", "minReplicas: two", "'two' is not of type 'integer'"),
        (
            "kserve/servingruntime.yaml",
            "protocolVersions:",
            "protocolVersion:",
            "has no field 'protocolVersion'",
        ),
        (
            "kserve/servingruntime.yaml",
            "readOnlyRootFilesystem: true",
            "readOnlyRootFilesystem: 1",
            "expected bool",
        ),
        ("kserve/inferenceservice.yaml", "storageUri:", "storageURI:", "has no field 'storageURI'"),
    ],
)
def test_a_misspelt_field_fails(tmp_path: Path, file: str, good: str, bad: str, error: str) -> None:
    text = (MANIFESTS / file).read_text()
    assert good in text
    broken = tmp_path / Path(file).name
    broken.write_text(text.replace(good, bad, 1))
    failed = [r for r in validate(broken) if not r["ok"]]
    assert len(failed) == 1
    assert any(error in e for e in failed[0]["errors"]), failed[0]["errors"]


def _checkov(directory: Path) -> dict:
    done = subprocess.run(
        [tool(CHECKOV), "-d", str(directory), "--framework", "kubernetes", "--output", "json"]
        + ["--skip-download"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    report = json.loads(done.stdout)
    return report[0] if isinstance(report, list) else report


def test_checkov_finds_nothing_unjustified() -> None:
    report = _checkov(MANIFESTS)
    failed = report["results"]["failed_checks"]
    assert failed == [], [(c["check_id"], c["resource"]) for c in failed]
    assert report["summary"]["passed"] > 50
    for skipped in report["results"]["skipped_checks"]:
        # each skip says why, next to the resource (checkov.io/skipN: ID=reason)
        assert len(skipped["check_result"].get("suppress_comment", "")) > 20, skipped


def test_checkov_sees_a_weakened_deployment(tmp_path: Path) -> None:
    text = (MANIFESTS / "pybackend.yaml").read_text()
    weakened = text.replace("allowPrivilegeEscalation: false", "allowPrivilegeEscalation: true")
    (tmp_path / "pybackend.yaml").write_text(weakened)
    failed = _checkov(tmp_path)["results"]["failed_checks"]
    assert "CKV_K8S_20" in {c["check_id"] for c in failed}
