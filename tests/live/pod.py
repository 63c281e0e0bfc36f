"""A Kubernetes pod template's container, translated to `docker run` flags, so the Helm chart's
pod spec can run where no cluster can: security contexts, environment (values, Secret and
field references), volumes (ConfigMap and emptyDir), ports, resource limits and the
termination grace. A field this translation does not know fails the test instead of being
dropped, so the translation cannot fall behind the chart silently."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

POD_KEYS = {"serviceAccountName", "automountServiceAccountToken", "securityContext",
            "terminationGracePeriodSeconds", "containers", "volumes", "restartPolicy"}
CONTAINER_KEYS = {"name", "image", "imagePullPolicy", "args", "env", "ports", "readinessProbe",
                  "livenessProbe", "resources", "securityContext", "volumeMounts"}
"""Fields translated (or, for the service account and image pull policy, without meaning in a
single container with no API server and a local image)."""


@dataclass
class Cluster:
    """What the pod's references resolve to: Secrets and ConfigMaps by name, the pod's name."""

    secrets: dict[str, dict[str, str]]
    config_maps: dict[str, dict[str, str]]
    pod_name: str
    volume_root: Path
    image: str | None = None
    """The image to run in place of the chart's (a local build)."""


@dataclass
class Translated:
    """`docker run` flags, the container's arguments, and what the probes and grace say."""

    flags: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    image: str = ""
    args: list[str] = field(default_factory=list)
    ports: dict[str, int] = field(default_factory=dict)
    readiness_path: str | None = None
    liveness_path: str | None = None
    grace_s: int = 30


def _unknown(kind: str, keys: set[str], known: set[str]) -> None:
    extra = keys - known
    if extra:
        raise AssertionError(f"{kind} fields this translation does not handle: {sorted(extra)}")


def _memory_bytes(quantity: str) -> int:
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "K": 10**3, "M": 10**6, "G": 10**9}
    for suffix, factor in units.items():
        if quantity.endswith(suffix):
            return int(float(quantity[: -len(suffix)]) * factor)
    return int(quantity)


def _cpus(quantity: str) -> str:
    return str(int(quantity[:-1]) / 1000) if quantity.endswith("m") else quantity


def _security(pod: dict[str, Any], container: dict[str, Any], flags: list[str]) -> None:
    merged = {**pod, **container}
    _unknown("securityContext", set(merged),
             {"runAsNonRoot", "runAsUser", "runAsGroup", "fsGroup", "seccompProfile",
              "allowPrivilegeEscalation", "readOnlyRootFilesystem", "privileged",
              "capabilities"})
    if "runAsUser" in merged:
        flags += ["--user", f"{merged['runAsUser']}:{merged.get('runAsGroup', 0)}"]
    if "fsGroup" in merged:
        flags += ["--group-add", str(merged["fsGroup"])]
    if merged.get("runAsNonRoot"):
        assert int(merged.get("runAsUser", -1)) > 0, "runAsNonRoot without a non-root runAsUser"
    seccomp = merged.get("seccompProfile", {}).get("type")
    assert seccomp in (None, "RuntimeDefault"), f"seccompProfile {seccomp} not translated"
    if merged.get("allowPrivilegeEscalation") is False:
        flags += ["--security-opt", "no-new-privileges"]
    if merged.get("readOnlyRootFilesystem"):
        flags += ["--read-only"]
    if merged.get("privileged"):
        flags += ["--privileged"]
    capabilities = merged.get("capabilities", {})
    _unknown("capabilities", set(capabilities), {"drop", "add"})
    flags += [f"--cap-drop={cap}" for cap in capabilities.get("drop", [])]
    flags += [f"--cap-add={cap}" for cap in capabilities.get("add", [])]


def _env(entries: list[dict[str, Any]], cluster: Cluster) -> dict[str, str]:
    env: dict[str, str] = {}
    for entry in entries:
        name = entry["name"]
        if "value" in entry:
            env[name] = str(entry["value"])
            continue
        source = entry["valueFrom"]
        if "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            secret = cluster.secrets.get(ref["name"], {})
            if ref["key"] in secret:
                env[name] = secret[ref["key"]]
            elif not ref.get("optional"):
                raise AssertionError(f"secret {ref['name']}/{ref['key']} is not in the cluster")
        elif source.get("fieldRef", {}).get("fieldPath") == "metadata.name":
            env[name] = cluster.pod_name
        else:
            raise AssertionError(f"env {name}: valueFrom {sorted(source)} not translated")
    return env


def _volumes(pod_volumes: list[dict[str, Any]], mounts: list[dict[str, Any]],
             cluster: Cluster, flags: list[str]) -> None:
    volumes = {v["name"]: v for v in pod_volumes}
    for mount in mounts:
        _unknown("volumeMount", set(mount), {"name", "mountPath", "readOnly"})
        volume = volumes[mount["name"]]
        _unknown(f"volume {mount['name']}", set(volume), {"name", "emptyDir", "configMap"})
        if "emptyDir" in volume:
            _unknown("emptyDir", set(volume["emptyDir"]), set())
            # A pod's emptyDir is a fresh, writable, world-writable directory.
            flags += ["--tmpfs", f"{mount['mountPath']}:rw,exec,mode=1777"]
        elif "configMap" in volume:
            _unknown("configMap volume", set(volume["configMap"]), {"name"})
            data = cluster.config_maps[volume["configMap"]["name"]]
            folder = cluster.volume_root / mount["name"]
            folder.mkdir(parents=True, exist_ok=True)
            for key, text in data.items():
                (folder / key).write_text(text)
                (folder / key).chmod(0o644)  # kubelet's default mode for ConfigMap files
            folder.chmod(0o755)
            mode = "ro" if mount.get("readOnly") else "rw"
            flags += ["--volume", f"{folder}:{mount['mountPath']}:{mode}"]
        else:
            raise AssertionError(f"volume {mount['name']}: {sorted(volume)} not translated")


def translate(pod: dict[str, Any], cluster: Cluster) -> Translated:
    """The pod template's only container as `docker run` flags (see the module docstring)."""
    _unknown("pod spec", set(pod), POD_KEYS)
    (container,) = pod["containers"]
    _unknown("container", set(container), CONTAINER_KEYS)
    out = Translated(image=cluster.image or container["image"], args=list(container["args"]))
    _security(pod.get("securityContext", {}), container.get("securityContext", {}), out.flags)
    out.env = _env(container.get("env", []), cluster)
    _volumes(pod.get("volumes", []), container.get("volumeMounts", []), cluster, out.flags)
    limits = container.get("resources", {}).get("limits", {})
    if "memory" in limits:
        out.flags += ["--memory", str(_memory_bytes(str(limits["memory"])))]
    if "cpu" in limits:
        out.flags += ["--cpus", _cpus(str(limits["cpu"]))]
    for port in container.get("ports", []):
        out.ports[port["name"]] = int(port["containerPort"])
        out.flags += ["--publish", f"127.0.0.1::{port['containerPort']}"]
    for kind in ("readinessProbe", "livenessProbe"):
        probe = container.get(kind)
        if probe:
            _unknown(kind, set(probe), {"httpGet", "initialDelaySeconds", "periodSeconds",
                                        "failureThreshold", "timeoutSeconds"})
            get = probe["httpGet"]
            _unknown(f"{kind}.httpGet", set(get), {"path", "port"})
            assert get["port"] in out.ports or isinstance(get["port"], int)
            path = str(get["path"])
            if kind == "readinessProbe":
                out.readiness_path = path
            else:
                out.liveness_path = path
    out.grace_s = int(pod.get("terminationGracePeriodSeconds", 30))
    return out


def run_flags(translated: Translated, name: str, network: str) -> list[str]:
    """`docker run` arguments after `run`: detached, named, on `network`; the environment goes
    by name only (values in the caller's environment), so no secret is on a command line."""
    flags = ["--detach", "--name", name, "--network", network, *translated.flags]
    for key in translated.env:
        flags += ["--env", key]
    return [*flags, translated.image, *translated.args]
