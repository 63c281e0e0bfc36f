"""Every PromQL query docs/prometheus.md gives is one promtool evaluates against known series
(tests/prometheus/*_test.yaml) and gets the figures worked out there; the rules example shows
what `sustain rules` writes."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

from sustain.service.evaluation.rules import SloRules, rules_document
from sustain.service.evaluation.tiers import DEFAULT_TIERS
from tests.prometheus.promql import promtool

HERE = Path(__file__).resolve().parent
DOC = HERE.parents[1] / "docs" / "prometheus.md"
QUERY_TESTS = HERE / "queries_test.yaml"


def one_line(expr: str) -> str:
    return re.sub(r"\s+", " ", expr).strip()


def documented_queries() -> list[str]:
    """The queries of the doc's ```promql blocks: a `#` line is a comment, an indented line
    continues the query above it."""
    queries: list[str] = []
    for block in re.findall(r"```promql\n(.*?)```", DOC.read_text(), flags=re.DOTALL):
        for line in block.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if line[0].isspace() and queries:
                queries[-1] += " " + line.strip()
            else:
                queries.append(line.strip())
    return [one_line(q) for q in queries]


def evaluated_queries() -> list[str]:
    exprs = []
    for path in sorted(HERE.glob("*_test.yaml")):
        for test in yaml.safe_load(path.read_text())["tests"]:
            exprs += [one_line(check["expr"]) for check in test.get("promql_expr_test", [])]
    return exprs


def test_every_documented_query_is_evaluated_by_a_promtool_test() -> None:
    queries = documented_queries()
    assert len(queries) >= 25, "the doc's promql blocks are found"
    evaluated = evaluated_queries()
    missing = [q for q in queries if not any(q in expr for expr in evaluated)]
    assert not missing, "\n".join(missing)


def test_the_rules_example_is_what_sustain_rules_writes() -> None:
    group, = rules_document([SloRules("chat-availability", 0.99, DEFAULT_TIERS)])["groups"]
    record = next(r for r in group["rules"] if r.get("record") == "sustain_slo:error_ratio:rate1h")
    page = next(r for r in group["rules"]
                if r.get("alert") and r["labels"]["tier"] == "page_fast")
    queries = documented_queries()
    assert one_line(record["expr"]) in queries
    assert one_line(page["expr"]) in queries


def test_documented_queries_give_the_worked_figures() -> None:
    result = subprocess.run([promtool(), "test", "rules", str(QUERY_TESTS)],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
