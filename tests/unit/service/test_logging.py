"""A log record is one line whatever the caller put in it: a dataset path or a name holding a
newline cannot forge a second record, nor an escape sequence colour the terminal."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from sustain.probes.log_lines import escape_controls
from sustain.service.logging import configure_logging

HOSTILE = "/data/x.jsonl\nFAKE line 2024-01-01 INFO sustain: admin signed in\x1b[31m"


@pytest.fixture
def restore_root() -> Iterator[None]:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    yield
    root.handlers[:], root.level = saved[0], saved[1]


def written(capsys: pytest.CaptureFixture[str]) -> str:
    return capsys.readouterr().err


@pytest.mark.usefixtures("restore_root")
def test_text_logs_escape_control_characters_in_arguments(
        capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info", "text")
    logging.getLogger("sustain.test").warning("cannot read dataset %s", HOSTILE)
    out = written(capsys)
    assert out.count("\n") == 1
    assert out.endswith("\n")
    assert "\x1b" not in out
    assert "cannot read dataset /data/x.jsonl\\nFAKE line 2024-01-01 INFO sustain: admin " \
        "signed in\\x1b[31m" in out


@pytest.mark.usefixtures("restore_root")
def test_text_logs_keep_an_exception_and_its_traceback_on_the_record_s_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info", "text")
    try:
        raise FileNotFoundError(f"no such file: {HOSTILE}\r\n\x85\u2028")
    except FileNotFoundError:
        logging.getLogger("sustain.test").exception("run %s failed", "r\n1")
    out = written(capsys)
    assert out.count("\n") == 1
    assert "\r" not in out
    assert "\x85" not in out
    assert "\u2028" not in out
    assert "run r\\n1 failed\\nTraceback (most recent call last):" in out
    assert "\\x1b[31m\\r\\n\\x85\\u2028" in out


def test_every_c0_c1_and_line_separator_is_escaped_and_text_is_kept() -> None:
    controls = "".join(map(chr, [*range(0x20), 0x7F, *range(0x80, 0xA0), 0x2028, 0x2029]))
    escaped = escape_controls(controls)
    assert escaped.isprintable()
    assert escaped.isascii()
    assert escape_controls("naïve → ok \\n already") == "naïve → ok \\n already"


@pytest.mark.usefixtures("restore_root")
def test_json_logs_are_one_object_per_line_with_the_text_intact(
        capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info", "json")
    logging.getLogger("sustain.test").warning("cannot read dataset %s", HOSTILE + "\u2028")
    out = written(capsys)
    assert out.count("\n") == 1
    assert "\x1b" not in out
    assert "\u2028" not in out
    assert json.loads(out)["message"] == f"cannot read dataset {HOSTILE}\u2028"
