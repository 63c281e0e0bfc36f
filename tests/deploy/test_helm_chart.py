"""The Helm chart, rendered by real Helm templating (helm-python-sdk) for the default values and
variants, every manifest validated against a current Kubernetes schema (kubernetes-validate),
and the properties operators rely on asserted: probes, security, graceful termination longer
than the shutdown grace, secrets only by reference, migrations as a hook, and the
PrometheusRule equal to what `sustain rules` prints for the same SLOs."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.helm import CHART, ROOT, by_kind, helm, render
from tests.processes import sustain_command
from tests.tools import require_tool

kubernetes_validate = pytest.importorskip(
    "kubernetes_validate", reason="kubernetes-validate (test extra) not installed")

KUBERNETES = "1.37.0"
CRDS = {"ServiceMonitor", "PrometheusRule"}
BASE = {"database": {"existingSecret": "sustain-db"}}
COMPOSE_CONFIG = yaml.safe_load((ROOT / "deploy" / "compose" / "sustain.yaml").read_text())
EVERYTHING = {
    **BASE, "config": COMPOSE_CONFIG, "serviceMonitor": {"enabled": True},
    "prometheusRule": {"enabled": True}, "networkPolicy": {"enabled": True},
    "autoscaling": {"enabled": True, "minReplicas": 2, "maxReplicas": 5},
    "apiKeys": {"existingSecret": "sustain-keys"},
    "secretEnv": [{"name": "OPENAI_API_KEY", "secretName": "llm", "key": "openai"}],
    "configEnv": {"REGION": "eu"},
}


@pytest.mark.parametrize("values", [
    BASE, EVERYTHING,
    {**BASE, "migrations": {"enabled": False}, "podDisruptionBudget": {"enabled": False},
     "serviceAccount": {"create": False, "name": "existing"}},
    {**BASE, "replicaCount": 3, "service": {"type": "LoadBalancer", "port": 9000},
     "networkPolicy": {"enabled": True, "ingressFrom": [
         {"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}],
         "egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]}]}},
], ids=["defaults", "everything", "minimal", "variant"])
def test_every_manifest_is_valid_kubernetes(values: dict[str, Any]) -> None:
    manifests = render(values)
    assert manifests
    for manifest in manifests:
        if manifest["kind"] in CRDS:
            assert manifest["apiVersion"] == "monitoring.coreos.com/v1"
            continue
        kubernetes_validate.validate(manifest, KUBERNETES, strict=True)


def test_helm_lint_is_clean() -> None:
    report = helm.lint(CHART, BASE, strict=True, kube_version=f"v{KUBERNETES}")
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


def test_defaults_two_replicas_probes_security_and_graceful_termination() -> None:
    kinds = by_kind(render(BASE))
    assert set(kinds) == {"ConfigMap", "Deployment", "Job", "PodDisruptionBudget", "Service",
                          "ServiceAccount"}
    deployment = kinds["Deployment"]
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["resources"]["requests"]
    assert container["resources"]["limits"]["memory"]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    env = {e["name"]: e for e in container["env"]}
    grace = int(env["SUSTAIN_SHUTDOWN_GRACE_S"]["value"])
    assert pod["terminationGracePeriodSeconds"] > grace
    writable = {m["mountPath"] for m in container["volumeMounts"] if not m.get("readOnly")}
    assert {"/tmp", "/var/lib/sustain"} <= writable, "read-only root: scratch is mounted"
    assert kinds["PodDisruptionBudget"]["spec"]["minAvailable"] == 1
    job = kinds["Job"]
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == ["migrate"]
    assert env["SUSTAIN_AUTO_MIGRATE"]["value"] == "false", "the hook migrates, not the pods"


def test_secrets_only_by_reference_never_inlined() -> None:
    manifests = render(EVERYTHING)
    kinds = by_kind(manifests)
    assert "Secret" not in kinds
    for kind in ("Deployment", "Job"):
        spec = kinds[kind]["spec"]["template"]["spec"]
        env = {e["name"]: e for e in spec["containers"][0]["env"]}
        assert env["SUSTAIN_DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {
            "name": "sustain-db", "key": "url"}
        assert "value" not in env["SUSTAIN_DATABASE_URL"]
        assert env["SUSTAIN_ADMIN_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "sustain-keys"
        assert env["OPENAI_API_KEY"]["valueFrom"]["secretKeyRef"] == {"name": "llm",
                                                                      "key": "openai"}


def test_secret_env_entries_fill_the_secret_allow_list_by_themselves() -> None:
    """`env:NAME` references resolve only for variables in SUSTAIN_SECRET_ENV: the names of
    secretEnv are listed there, in the pods and the migration job alike."""
    two = {**BASE, "secretEnv": [{"name": "OPENAI_API_KEY", "secretName": "llm", "key": "o"},
                                 {"name": "HOOK_KEY", "secretName": "hooks", "key": "k"}]}
    for kind in ("Deployment", "Job"):
        spec = by_kind(render(two))[kind]["spec"]["template"]["spec"]
        env = [e for e in spec["containers"][0]["env"] if e["name"] == "SUSTAIN_SECRET_ENV"]
        assert env == [{"name": "SUSTAIN_SECRET_ENV", "value": "OPENAI_API_KEY,HOOK_KEY"}]
    own = by_kind(render({**two, "env": {"SUSTAIN_SECRET_ENV": "OPENAI_*,HOOK_KEY"}}))
    env = own["Deployment"]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert [e["value"] for e in env if e["name"] == "SUSTAIN_SECRET_ENV"] == ["OPENAI_*,HOOK_KEY"]
    none = by_kind(render(BASE))["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert "SUSTAIN_SECRET_ENV" not in {e["name"] for e in none["env"]}
    with pytest.raises(helm.HelmValuesError):
        helm.Chart.load(CHART).validate_schema({**BASE, "secretEnv": [
            {"name": "SUSTAIN_DATABASE_URL", "secretName": "db", "key": "url"}]})


def test_config_env_sets_the_variables_and_lists_them_as_the_only_expandable_ones() -> None:
    """A config's ${NAME} expands only names in SUSTAIN_CONFIG_ENV: configEnv's entries are
    set in the pods and listed there; without them nothing expands."""
    values = {**BASE, "configEnv": {"VLLM_URL": "http://vllm:8000/v1", "REGION": "eu"}}
    container = by_kind(render(values))["Deployment"]["spec"]["template"]["spec"][
        "containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["SUSTAIN_CONFIG_ENV"] == "REGION,VLLM_URL"
    assert (env["VLLM_URL"], env["REGION"]) == ("http://vllm:8000/v1", "eu")
    own = by_kind(render({**values, "env": {"SUSTAIN_CONFIG_ENV": "VLLM_*"}}))
    names = [e["name"] for e in own["Deployment"]["spec"]["template"]["spec"]["containers"][0]
             ["env"]]
    assert names.count("SUSTAIN_CONFIG_ENV") == 1
    none = by_kind(render(BASE))["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert "SUSTAIN_CONFIG_ENV" not in {e["name"] for e in none["env"]}


@pytest.mark.parametrize("name", ["SUSTAIN_ADMIN_KEY", "PGPASSWORD", "POSTGRES_PASSWORD",
                                  "DATABASE_URL", "bad name"])
def test_config_env_cannot_name_sustain_s_own_or_database_variables(name: str) -> None:
    with pytest.raises(helm.HelmValuesError):
        helm.Chart.load(CHART).validate_schema({**BASE, "configEnv": {name: "x"}})


def test_a_secret_cannot_also_be_an_expandable_config_variable() -> None:
    values = {**BASE, "configEnv": {"OPENAI_API_KEY": "x"},
              "secretEnv": [{"name": "OPENAI_API_KEY", "secretName": "llm", "key": "o"}]}
    with pytest.raises(helm.HelmRenderError, match=r"configEnv\.OPENAI_API_KEY"):
        render(values)


def test_values_that_would_inline_a_secret_or_omit_the_database_are_refused() -> None:
    chart = helm.Chart.load(CHART)
    with pytest.raises(helm.HelmValuesError):
        chart.validate_schema({**BASE, "env": {"SUSTAIN_DATABASE_URL": "postgresql://u:p@h/d"}})
    with pytest.raises(helm.HelmValuesError):
        chart.validate_schema({**BASE, "replicas": 3})
    with pytest.raises(helm.HelmRenderError, match="existingSecret"):
        chart.render({}, name="sustain", namespace="monitoring")


def test_optional_objects_follow_their_switches() -> None:
    kinds = by_kind(render(EVERYTHING))
    assert {"ServiceMonitor", "PrometheusRule", "NetworkPolicy", "HorizontalPodAutoscaler"} \
        <= set(kinds)
    assert "replicas" not in kinds["Deployment"]["spec"], "the HPA owns the replica count"
    monitor = kinds["ServiceMonitor"]["spec"]["endpoints"][0]
    assert (monitor["port"], monitor["path"]) == ("http", "/metrics")
    assert "authorization" not in monitor

    config = yaml.safe_load(kinds["ConfigMap"]["data"]["sustain.yaml"])
    assert config == COMPOSE_CONFIG


def test_service_monitor_scrapes_with_a_key_when_metrics_need_one() -> None:
    values = {**BASE, "serviceMonitor": {"enabled": True, "authorization": {
        "existingSecret": "prometheus-key", "key": "token"}},
        "env": {"SUSTAIN_METRICS_AUTH": "true"}}
    monitor = by_kind(render(values))["ServiceMonitor"]["spec"]["endpoints"][0]
    assert monitor["authorization"] == {"type": "Bearer", "credentials": {
        "name": "prometheus-key", "key": "token"}}


def test_prometheus_rule_is_what_sustain_rules_prints(tmp_path: Path) -> None:
    rule = by_kind(render(EVERYTHING))["PrometheusRule"]
    expected = yaml.safe_load(subprocess.run(
        [*sustain_command(), "rules", "--config", str(ROOT / "deploy/compose/sustain.yaml")],
        capture_output=True, text=True, timeout=60, check=True).stdout)
    got = {g["name"]: g["rules"] for g in rule["spec"]["groups"]}
    want = {g["name"]: g["rules"] for g in expected["groups"]}
    assert got.keys() == want.keys()
    for name, rules in want.items():
        assert [r.get("record") or r["alert"] for r in got[name]] == \
            [r.get("record") or r["alert"] for r in rules]
        for mine, theirs in zip(got[name], rules, strict=True):
            assert mine["expr"] == theirs["expr"]
            assert mine["labels"] == theirs["labels"]
            assert mine.get("for") == theirs.get("for")
            if "annotations" in theirs:
                assert mine["annotations"]["summary"] == theirs["annotations"]["summary"]
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rule["spec"]))
    promtool = require_tool("promtool", "Debian package `prometheus`")
    check = subprocess.run([promtool, "check", "rules", str(tmp_path / "rules.yaml")],
                           capture_output=True, text=True, timeout=60, check=False)
    assert check.returncode == 0, check.stdout + check.stderr


def test_the_documented_values_example_renders_and_its_config_validates(tmp_path: Path) -> None:
    page = (ROOT / "docs" / "deploy.md").read_text()
    block = page.split("where `my-values.yaml`", 1)[1].split("```yaml\n", 1)[1]
    values = yaml.safe_load(block.split("```", 1)[0])
    kinds = by_kind(render(values))
    assert {"Deployment", "ServiceMonitor", "PrometheusRule"} <= set(kinds)
    (tmp_path / "sustain.yaml").write_text(yaml.safe_dump(values["config"]))
    result = subprocess.run([*sustain_command(), "validate", str(tmp_path / "sustain.yaml")],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_slo_tiers_switched_off_or_emptied_give_no_alerts_as_in_sustain_rules() -> None:
    config = {"slos": [
        {"name": "none", "probes": ["p"], "sli": {"kind": "availability"}, "objective": 0.99,
         "tiers": []},
        {"name": "one", "probes": ["p"], "sli": {"kind": "availability"}, "objective": 0.99,
         "tiers": [{"name": "page_fast", "severity": "page", "factor": 14.4,
                    "long_window_s": 3600, "short_window_s": 300, "for_s": 120},
                   {"name": "page_slow", "severity": "page", "factor": 6,
                    "long_window_s": 21600, "short_window_s": 1800, "enabled": False}]}]}
    rule = by_kind(render({**BASE, "config": config, "prometheusRule": {"enabled": True}}))
    groups = {g["name"]: g["rules"] or [] for g in rule["PrometheusRule"]["spec"]["groups"]}
    assert [r for r in groups["sustain-slo-none"] if "alert" in r] == []
    alerts = [r for r in groups["sustain-slo-one"] if "alert" in r]
    assert [(a["labels"]["tier"], a.get("for")) for a in alerts] == [("page_fast", "120s")]
    assert [r["record"] for r in groups["sustain-slo-one"] if "record" in r] == [
        "sustain_slo:error_ratio:rate5m", "sustain_slo:error_ratio:rate1h"]


def test_the_migration_job_is_not_selected_as_a_server_pod() -> None:
    kinds = by_kind(render(EVERYTHING))
    job_labels = kinds["Job"]["spec"]["template"]["metadata"]["labels"]
    for kind, selector in (
            ("Deployment", kinds["Deployment"]["spec"]["selector"]["matchLabels"]),
            ("Service", kinds["Service"]["spec"]["selector"]),
            ("PodDisruptionBudget",
             kinds["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"]),
            ("NetworkPolicy", kinds["NetworkPolicy"]["spec"]["podSelector"]["matchLabels"])):
        assert not selector.items() <= job_labels.items(), kind


def test_measuring_pods_get_whole_cores_of_their_own_and_the_hook_job_does_not() -> None:
    """Guaranteed QoS with integer CPUs (requests equal to limits), so a static CPU manager can
    pin the pods that time requests; the migration Job measures nothing."""
    kinds = by_kind(render(BASE))
    (container,) = kinds["Deployment"]["spec"]["template"]["spec"]["containers"]
    resources = container["resources"]
    assert resources["requests"] == resources["limits"]
    cpu = str(resources["limits"]["cpu"])
    assert cpu.isdigit()
    assert int(cpu) >= 2
    job = kinds["Job"]["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert "cpu" not in job["limits"]


AGENT = {"location": "edge-1", "agent": {
    "enabled": True, "server": "https://sustain.example.com",
    "keySecret": {"existingSecret": "edge-1-agent"}},
    "secretEnv": [{"name": "OPENAI_API_KEY", "secretName": "llm", "key": "openai"}]}


def test_a_release_s_replicas_measure_from_its_location() -> None:
    container = by_kind(render({**BASE, "location": "eu-west-1"}))["Deployment"]["spec"][
        "template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["SUSTAIN_LOCATION"] == "eu-west-1"
    with pytest.raises(helm.HelmValuesError):
        helm.Chart.load(CHART).validate_schema({**BASE, "location": "EU West"})


def test_an_agent_only_release_runs_agents_and_nothing_that_needs_the_database() -> None:
    """No server, Service, config, migration Job or database URL: agent pods that reach the
    service over HTTPS with their key from a Secret, with whole cores of their own and their
    spool on a bounded volume."""
    manifests = render(AGENT)
    for manifest in manifests:
        kubernetes_validate.validate(manifest, KUBERNETES, strict=True)
    assert sorted(m["kind"] for m in manifests) == ["Deployment", "ServiceAccount"]
    (deployment,) = [m for m in manifests if m["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = container["args"]
    assert args[0] == "agent"
    assert args[args.index("--server") + 1] == "https://sustain.example.com"
    assert args[args.index("--location") + 1] == "edge-1"
    assert "--allow-plain-http" not in args
    env = {e["name"]: e for e in container["env"]}
    assert env["SUSTAIN_AGENT_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "edge-1-agent"
    assert env["SUSTAIN_SECRET_ENV"]["value"] == "OPENAI_API_KEY"
    assert not [name for name in env if "DATABASE" in name]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    resources = container["resources"]
    assert resources["requests"] == resources["limits"]
    assert str(resources["limits"]["cpu"]).isdigit()
    (data,) = [v for v in pod["volumes"] if v["name"] == "data"]
    assert data["emptyDir"]["sizeLimit"] == "576Mi"
    assert deployment["spec"]["selector"]["matchLabels"][
        "app.kubernetes.io/component"] == "agent"


@pytest.mark.parametrize(("missing", "message"), [
    ("server", "agent.server"), ("keySecret", "agent.keySecret.existingSecret")])
def test_an_agent_release_names_what_it_lacks(missing: str, message: str) -> None:
    values = {**AGENT, "agent": {k: v for k, v in AGENT["agent"].items()  # type: ignore[attr-defined]
                                 if k != missing}}
    with pytest.raises(helm.HelmRenderError, match=message):
        render(values)
