"""How exactly does sustain measure a thinking model? TTFT, TTFO and E2E against the server's
own clock.

As benchmarks/accuracy.py, with the simulated model thinking first: `--reasoning-tokens`
reasoning deltas (chat `reasoning_content`, Responses `response.reasoning_text.delta`,
Anthropic `thinking_delta`), 10 ms apart, before its 64 answer tokens; the simulator logs when
it wrote the first answer token, so for each request

    TTFO error = client TTFO - (server first-answer write - client t_send)

beside the TTFT (the first thought) and E2E errors, and each request's reasoning tokens are
checked against what the simulator sent. Targets: median <= 1 ms and p99 <= 3 ms at 8 users,
every reasoning count right; side by side, the same measurement over httpx.

    python benchmarks/reasoning_accuracy.py [--kinds ...] [--levels 8] [--requests 320]
        [--reasoning-tokens 16] [--no-record]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.accuracy import against_httpx, arguments, measure
from benchmarks.common import record

KINDS = "openai-chat,openai-responses,anthropic-messages"


def main() -> None:
    args = arguments(__doc__.split("\n\n")[0], kinds=KINDS, levels="8", requests="320",
                     reasoning_tokens=16).parse_args()
    table, command, ours, base = measure(args, "reasoning_accuracy.py")
    if args.no_record:
        print(table)
        return
    record("reasoning accuracy: TTFT, TTFO and E2E error against server-side truth", command,
           table + "\n\nTarget: median <= 1 ms and p99 <= 3 ms; every request's reasoning "
           "tokens what the simulator sent.",
           headline=f"worst error p99 {ours:.3f} ms (TTFT, TTFO or E2E)",
           ratio=against_httpx(ours, base))


if __name__ == "__main__":
    main()
