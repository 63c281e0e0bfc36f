"""A measurement worker logs on its own (stderr of a child process): one line per record,
whatever its message or exception carries."""

from __future__ import annotations

import io
import logging

from sustain.probes.workers.child import log_handler


def test_a_worker_log_record_with_newlines_and_escapes_is_one_line() -> None:
    stream = io.StringIO()
    logger = logging.getLogger("sustain.worker.test_one_line")
    logger.propagate = False
    logger.handlers[:] = [log_handler(stream)]
    try:
        raise ValueError("bad\nTraceback (forged)")
    except ValueError:
        logger.exception("preparing run %s failed: dataset %s", 7,
                         "/data/x.jsonl\n2026-12-04 WARNING forged line \x1b[31m")
    text = stream.getvalue()
    assert text.count("\n") == 1
    assert text.endswith("\n")
    assert "\\n2026-12-04 WARNING forged line \\x1b[31m" in text
    assert "bad\\nTraceback (forged)" in text
