"""benchmarks/RESULTS.md holds the latest result of each benchmark: a run rewrites its own
section and keeps the others, and the file has exactly one section per recording script."""

from __future__ import annotations

import ast
from datetime import UTC, datetime
from pathlib import Path

import pytest

from benchmarks import common, results

FOLDER = Path(results.__file__).parent
NOT_RECORDING = {"__init__", "common", "results", "revision", "sizing"}
"""Modules of benchmarks/ that are no benchmark: they never call record()."""


def at(day: int, hour: int = 12) -> datetime:
    return datetime(2026, 12, day, hour, 0, tzinfo=UTC)


def run(title: str, day: int, figure: str, headline: str | None = None,
        ratio: str | None = None) -> str:
    return results.section(title, at(day), "2 cores", f"python benchmarks/x.py --{figure}",
                           f"| figure |\n|---|\n| {figure} |\n\nTarget: none.", headline, ratio)


def headings(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("## ")]


def summary_row(text: str, name: str) -> list[str]:
    rows = [line for line in text.splitlines() if line.startswith(f"| {name} |")]
    assert len(rows) == 1, rows
    return [cell.strip() for cell in rows[0].strip("|").split(" | ")]


def test_a_run_replaces_its_own_section_and_keeps_the_others() -> None:
    text = results.rewrite(results.rewrite("", run("accuracy: error", 1, "a1")),
                           run("capacity: rate", 1, "c1", headline="400 req/s"))

    after = results.rewrite(text, run("capacity: rate", 2, "c2", headline="1600 req/s",
                                      ratio="2.0x httpx"))

    assert headings(after) == ["## accuracy: error — 2026-12-01 12:00 UTC",
                               "## capacity: rate — 2026-12-02 12:00 UTC"]
    assert "| a1 |" in after
    assert "| c2 |" in after
    assert "| c1 |" not in after
    row = summary_row(after, "capacity")
    assert row[3:] == ["1600 req/s", "2.0x httpx", "2026-12-02 12:00"]
    assert "400 req/s" not in after


def test_the_first_run_writes_the_whole_file_from_nothing() -> None:
    text = results.rewrite("", run("drift: detect", 3, "d", headline="14 ms"))

    assert text.startswith(results.PREAMBLE)
    assert headings(text) == ["## drift: detect — 2026-12-03 12:00 UTC"]
    assert summary_row(text, "drift")[3:] == ["14 ms", results.NO_FIGURE, "2026-12-03 12:00"]
    assert summary_row(text, "capacity")[3:] == ["not run yet", results.NO_FIGURE,
                                                 results.NO_FIGURE]


def test_an_appended_history_keeps_only_the_newest_section_of_each_benchmark() -> None:
    appended = "# Benchmark results\n\nAppended; newest last.\n\n" + "\n".join([
        run("accuracy: error", 1, "a1"), run("capacity: rate", 1, "c1"),
        run("accuracy: error", 2, "a2"), run("capacity: rate", 3, "c3"),
        run("accuracy: error", 4, "a4")])

    text = results.rewrite(appended, run("knee: search", 5, "k5"))

    assert headings(text) == ["## accuracy: error — 2026-12-04 12:00 UTC",
                              "## capacity: rate — 2026-12-03 12:00 UTC",
                              "## knee: search — 2026-12-05 12:00 UTC"]
    assert "Appended; newest last." not in text


def test_sections_follow_the_fixed_order_whatever_order_they_ran_in() -> None:
    text = ""
    for name in ["hostile", "accuracy", "drift", "capacity"]:
        text = results.rewrite(text, run(f"{name}: x", 1, name))

    order = [b.name for b in results.BENCHMARKS]
    found = [line[3:].split(":", 1)[0] for line in headings(text)]
    assert found == sorted(found, key=order.index)


def test_an_unregistered_benchmark_keeps_its_section_after_the_registered_ones() -> None:
    text = results.rewrite(results.rewrite("", run("new thing: x", 1, "n")),
                           run("accuracy: error", 1, "a"))

    assert [line[3:].split(":", 1)[0] for line in headings(text)] == ["accuracy", "new thing"]
    assert summary_row(text, "new thing")[1] == results.NO_FIGURE


def test_subheadings_and_code_in_a_body_stay_in_their_section() -> None:
    body = "### a subheading\n\n```\n## not a heading: no date\n```\n"
    own = results.section("query: history", at(1), "2 cores", "python q.py", body)

    text = results.rewrite(results.rewrite("", own), run("accuracy: error", 2, "a"))

    assert body.strip() in text
    assert len(results.split_sections(text)) == 2


def test_a_pipe_in_a_headline_does_not_break_the_summary_table() -> None:
    text = results.rewrite("", run("cancel: x", 1, "c", headline="median | max 0.5 s"))

    assert summary_row(text, "cancel")[3] == "median \\| max 0.5 s"


def test_rewriting_the_same_run_twice_changes_nothing() -> None:
    once = results.rewrite(run("accuracy: error", 1, "a"), run("capacity: rate", 2, "c"))

    assert results.rewrite(once, run("capacity: rate", 2, "c")) == once


def test_record_rewrites_the_file_it_writes(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(common, "RESULTS", tmp_path / "RESULTS.md")
    common.record("cancel: from the request", "python benchmarks/cancel.py", "| 1 |",
                  headline="max 0.5 s")
    common.record("cancel: from the request", "python benchmarks/cancel.py", "| 2 |",
                  headline="max 0.4 s")
    common.record("knee: the search", "python benchmarks/knee.py", "| k |")

    text = (tmp_path / "RESULTS.md").read_text(encoding="utf-8")
    assert [key for key, _ in results.split_sections(text)] == ["knee", "cancel"]
    assert "| 2 |" in text
    assert "| 1 |" not in text
    assert summary_row(text, "cancel")[3] == "max 0.4 s"


def recorded_keys() -> dict[str, str]:
    """module: the key of the title its record() call passes, read from the source."""
    keys = {}
    for path in sorted(FOLDER.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id == "record":
                title = node.args[0]
                # the title is the stable key: a literal, so it can be read from the source
                assert isinstance(title, ast.Constant), path.name
                assert isinstance(title.value, str), path.name
                keys[path.stem] = results.key_of(title.value)
    return keys


def test_every_module_records_or_is_listed_as_no_benchmark() -> None:
    modules = {path.stem for path in FOLDER.glob("*.py")}
    assert modules - NOT_RECORDING == set(recorded_keys())


def test_the_registry_names_every_recording_module_by_its_key() -> None:
    assert {b.module: b.name for b in results.BENCHMARKS} == recorded_keys()


def test_results_md_has_exactly_one_section_per_recording_benchmark() -> None:
    text = (FOLDER / "RESULTS.md").read_text(encoding="utf-8")
    found = [key for key, _ in results.split_sections(text)]

    assert sorted(found) == sorted(recorded_keys().values())
    assert found == [b.name for b in results.BENCHMARKS]


def test_results_md_is_what_a_rewrite_of_any_of_its_sections_gives() -> None:
    text = (FOLDER / "RESULTS.md").read_text(encoding="utf-8")

    for _, chunk in results.split_sections(text):
        assert results.rewrite(text, chunk) == text


def test_the_readme_says_how_to_run_every_benchmark() -> None:
    readme = (FOLDER / "README.md").read_text(encoding="utf-8")

    missing = [b.module for b in results.BENCHMARKS if f"`{b.command}" not in readme]
    assert missing == []
