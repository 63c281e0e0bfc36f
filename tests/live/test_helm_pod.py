"""The Helm chart's pods, rendered as `helm install` would (real Helm templating) and run as
containers with their security contexts, environment, Secret references, ConfigMap and
emptyDir mounts, limits and probes translated (tests/live/pod.py): the migration hook Job
migrates a fresh database on the compose stack's PostgreSQL and exits 0, then the server pod
syncs the chart's config, passes its readiness and liveness probes, takes the admin key from
its Secret, and drains on SIGTERM within its termination grace."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.deploy.helm import by_kind, render
from tests.live.docker import ROOT, container_name, docker, inspect, published_port, remove
from tests.live.pod import Cluster, run_flags, translate
from tests.live.stack import ComposeStack
from tests.processes import ADMIN_HEADERS, TEST_ADMIN_KEY, wait_until

DATABASE = "helm_pod"
VALUES: dict[str, Any] = {
    "image": {"repository": "sustain", "tag": "dev", "pullPolicy": "Never"},
    "database": {"existingSecret": "sustain-db"},
    "apiKeys": {"existingSecret": "sustain-keys"},
    "config": yaml.safe_load((ROOT / "deploy" / "compose" / "sustain.yaml").read_text()),
    "shutdownGraceSeconds": 10,
}


def test_the_charts_pods_migrate_and_serve_on_the_compose_postgres(
        stack: ComposeStack, tmp_path: Path) -> None:
    for sql in (f"DROP DATABASE IF EXISTS {DATABASE}", f"CREATE DATABASE {DATABASE}"):
        stack.compose("exec", "-T", "postgres", "psql", "--username", "sustain", "--dbname",
                      "sustain", "--command", sql)
    manifests = render(VALUES)
    kinds = by_kind(manifests)
    cluster = Cluster(
        secrets={"sustain-db": {"url": f"postgresql://sustain:sustain@postgres:5432/{DATABASE}"},
                 "sustain-keys": {"admin-key": TEST_ADMIN_KEY}},
        config_maps={m["metadata"]["name"]: m["data"] for m in manifests
                     if m["kind"] == "ConfigMap"},
        pod_name="sustain-5c7d9f8b6-x2x7q", volume_root=tmp_path)
    names: list[str] = []
    try:
        job_spec = kinds["Job"]["spec"]
        job = translate(job_spec["template"]["spec"], cluster)
        names.append(container_name("sustain-migrate"))
        docker("run", *run_flags(job, names[-1], stack.network), env=job.env)
        exit_code = docker("wait", names[-1], timeout_s=job_spec["activeDeadlineSeconds"]).stdout
        assert int(exit_code) == 0, docker("logs", names[-1]).stderr[-3000:]

        server = translate(kinds["Deployment"]["spec"]["template"]["spec"], cluster)
        assert server.env["SUSTAIN_AUTO_MIGRATE"] == "false"
        assert "--read-only" in server.flags
        assert "--cap-drop=ALL" in server.flags
        names.append(container_name("sustain-pod"))
        docker("run", *run_flags(server, names[-1], stack.network), env=server.env)
        base = f"http://127.0.0.1:{published_port(names[-1], server.ports['http'])}"

        def answers(path: str | None) -> bool:
            assert path is not None
            try:
                return httpx.get(base + path, timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(lambda: answers(server.readiness_path), timeout_s=90, step_s=0.5)
        assert answers(server.liveness_path)
        ready = httpx.get(base + "/readyz", timeout=5).json()
        assert ready["checks"]["migrations"] == "ok"
        assert httpx.get(base + "/api/v1/probes", timeout=5).status_code == 401
        probes = httpx.get(base + "/api/v1/probes", headers=ADMIN_HEADERS,
                           timeout=5).json()["items"]
        assert {p["name"] for p in probes} == {"simulator-heartbeat", "simulator-load"}

        started = time.monotonic()
        docker("stop", "--time", str(server.grace_s), names[-1], timeout_s=server.grace_s + 30)
        took = time.monotonic() - started
        state = inspect(names[-1])["State"]
        assert state["ExitCode"] == 0, docker("logs", names[-1]).stderr[-3000:]
        # Only guards against a hang: it exits in seconds; past the grace docker would kill it
        # (and the exit code would say so).
        assert took < server.grace_s
    finally:
        remove(names)
