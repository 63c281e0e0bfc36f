"""The translation the live suite runs the chart's pods with (tests/live/pod.py): the rendered
Deployment becomes the locked-down `docker run` flags the chart means, and a pod field it does
not know is refused rather than dropped."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.helm import by_kind, render
from tests.live.pod import Cluster, run_flags, translate

VALUES: dict[str, Any] = {"database": {"existingSecret": "db"},
                          "apiKeys": {"existingSecret": "keys"}}


def _cluster(tmp_path: Path, manifests: list[dict[str, Any]]) -> Cluster:
    return Cluster(secrets={"db": {"url": "postgresql://u:p@db/x"}, "keys": {"admin-key": "k"}},
                   config_maps={m["metadata"]["name"]: m["data"] for m in manifests
                                if m["kind"] == "ConfigMap"},
                   pod_name="sustain-abc", volume_root=tmp_path)


def test_the_deployment_becomes_locked_down_docker_run_flags(tmp_path: Path) -> None:
    manifests = render(VALUES)
    pod = by_kind(manifests)["Deployment"]["spec"]["template"]["spec"]
    out = translate(pod, _cluster(tmp_path, manifests))
    for flag in ("--read-only", "--cap-drop=ALL", "no-new-privileges", "10001:10001"):
        assert flag in out.flags
    assert "--tmpfs" in out.flags
    assert out.env["SUSTAIN_DATABASE_URL"] == "postgresql://u:p@db/x"
    assert out.env["SUSTAIN_ADMIN_KEY"] == "k"
    assert out.env["SUSTAIN_REPLICA_ID"] == "sustain-abc"
    assert out.flags[out.flags.index("--memory") + 1] == str(2**30)
    assert (out.readiness_path, out.liveness_path, out.grace_s) == ("/readyz", "/healthz", 45)
    assert (tmp_path / "config" / "sustain.yaml").is_file()
    argv = run_flags(out, "name", "net")
    assert "postgresql://u:p@db/x" not in " ".join(argv), "secrets go by environment only"


@pytest.mark.parametrize("fault", ["pod field", "container field", "capability", "volume",
                                   "configMap items", "emptyDir medium", "exec probe"])
def test_a_field_the_translation_does_not_know_is_refused(tmp_path: Path, fault: str) -> None:
    manifests = render(VALUES)
    pod = copy.deepcopy(by_kind(manifests)["Deployment"]["spec"]["template"]["spec"])
    container = pod["containers"][0]
    if fault == "pod field":
        pod["hostNetwork"] = True
    elif fault == "container field":
        container["lifecycle"] = {"preStop": {"exec": {"command": ["sleep", "5"]}}}
    elif fault == "capability":
        container["securityContext"]["seLinuxOptions"] = {"level": "s0"}
    elif fault == "volume":
        pod["volumes"][0] = {"name": pod["volumes"][0]["name"], "hostPath": {"path": "/"}}
    elif fault == "configMap items":
        config = next(v for v in pod["volumes"] if "configMap" in v)
        config["configMap"]["items"] = [{"key": "sustain.yaml", "path": "other.yaml"}]
    elif fault == "emptyDir medium":
        next(v for v in pod["volumes"] if "emptyDir" in v)["emptyDir"]["medium"] = "Memory"
    else:
        container["livenessProbe"] = {"exec": {"command": ["true"]}}
    with pytest.raises(AssertionError, match=r"does not handle|not translated"):
        translate(pod, _cluster(tmp_path, manifests))
