"""A measurement worker process: `python -m sustain.probes.workers.child`, started by
WorkerPool with its stdin and stdout as the pipe to its parent (see wire.py).

It does nothing but measure: its own uvloop event loop, its own connections, no database and
no HTTP server; the cyclic garbage collector frozen after start-up and paused while a stage
runs. What could hold its loop is kept off it: a run's secret, dataset and tokenizer are
loaded in a thread when the run opens; samples leave as rows in batches (at most every
BATCH_S, or BATCH_SAMPLES at once); summaries are the parent's work. It ends when its stdin
closes (the parent stopped or died); Ctrl-C is for the parent to handle.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import pickle
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Any, TextIO

import uvloop

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.secrets import SecretUnavailableError
from sustain.probes.client.target import Target
from sustain.probes.load.clock import RunClock
from sustain.probes.load.deadline_timer import spin_until_ns
from sustain.probes.load.drivers import Prepare, Request, StageContext
from sustain.probes.load.quiet_gc import quiet_gc
from sustain.probes.load.stages import OpenStage
from sustain.probes.log_lines import OneLineFormatter
from sustain.probes.measure.sample import Sample
from sustain.probes.protocols.registry import is_check
from sustain.probes.runner import (
    RunStop,
    finish,
    prepare_requests,
    ready,
    run_stage,
    unless_stopped,
)
from sustain.probes.workers import wire
from sustain.probes.workers.shards import Shard
from sustain.probes.workload.dataset import DatasetError
from sustain.probes.workload.sessions import Dialogue, Sessions
from sustain.probes.workload.spec import Workload, WorkloadError

logger = logging.getLogger("sustain.worker")

BATCH_SAMPLES = 256
BATCH_BYTES = 1 << 20
"""A batch is sent once it holds this many samples or about this many bytes (a sample with
thousands of inter-token gaps is large), far below wire.MAX_MESSAGE_BYTES."""
BATCH_S = 0.05
"""Samples reach the parent at most this many seconds after they were measured."""


@dataclass(slots=True)
class OpenRun:
    prepare: Prepare
    sessions: Sessions | None = None
    """A sessions run's conversations (dealt among the shards of each stage)."""
    stop: RunStop | None = None
    """Ends the stage in progress."""
    task: asyncio.Task[None] | None = None


@dataclass(slots=True)
class Worker:
    """The worker's state: its connections, the runs open on it and the samples not yet sent."""

    write: Any
    """Sends bytes to the parent (the stdout pipe's transport.write)."""
    clients: HttpClients | None = None
    runs: dict[int, OpenRun] = field(default_factory=dict)
    outbox: dict[int, list[wire.Row]] = field(default_factory=dict)
    queued: int = 0
    queued_bytes: int = 0
    flush_at: asyncio.TimerHandle | None = None
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    cleanups: set[asyncio.Task[None]] = field(default_factory=set)
    """What closed runs leave behind, being cleared (a RAG probe's pgvector table): awaited,
    never cancelled, when the parent closes the pipe (a drop cut short would leave it)."""
    closed: set[int] = field(default_factory=set)
    """Runs closed while they were still being opened."""

    def send(self, message: wire.Message) -> None:
        self.write(wire.pack(message))

    def handle(self, message: wire.Message) -> None:
        op, key = message.get("op"), message.get("run")
        if op == "config":
            self.clients = HttpClients(int(message["max_connections"]),
                                       egress=pickle.loads(message["egress"]))
            self.send({"op": "ready", "pid": os.getpid()})
        elif op == "open" and isinstance(key, int):
            self._spawn(self.open(key, message))
        elif op == "stage" and isinstance(key, int) and key in self.runs:
            run = self.runs[key]
            run.stop = RunStop()
            run.task = self._spawn(self.stage(key, run, run.stop, message))
        elif op == "stop" and isinstance(key, int) and key in self.runs:
            stop = self.runs[key].stop
            if stop is not None:
                stop.set(str(message.get("reason", "stopped")))
        elif op == "close" and isinstance(key, int):
            closed = self.runs.pop(key, None)
            if closed is None:
                self.closed.add(key)
                return
            if closed.task is not None:
                closed.task.cancel()
            self._clean(closed.prepare)
        else:
            logger.warning("unknown message %r from the parent", op)

    def _clean(self, prepare: Prepare) -> None:
        """Clear what a closed run leaves behind, in a task that outlives the pipe."""
        task = asyncio.get_running_loop().create_task(finish(prepare))
        self.cleanups.add(task)
        task.add_done_callback(self.cleanups.discard)

    def _spawn(self, work: Any) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    async def open(self, key: int, message: wire.Message) -> None:
        """Prepare a run (in a thread: reading a secret, a dataset, a tokenizer)."""
        assert self.clients is not None
        try:
            target: Target = pickle.loads(message["target"])
            workload: Workload = pickle.loads(message["workload"])
            warm_clients(self.clients, target, fresh=workload.connection == "new")
            prepare = await asyncio.to_thread(
                prepare_requests, self.clients, target, workload,
                pickle.loads(message["secrets"]), pickle.loads(message["datasets"]),
                pickle.loads(message["replay"]))
            # a RAG probe's corpus, embedded in every worker; synthetic prompts sized by the
            # run's fit, or (the run's first worker) by a fit of its own
            calibration = await ready(prepare, pickle.loads(message["calibration"])
                                      if message.get("calibration") is not None else None)
        except SecretUnavailableError as exc:
            self.send({"op": "failed", "run": key, "kind": "secret", "error": str(exc)})
        except DatasetError as exc:
            self.send({"op": "failed", "run": key, "kind": "dataset", "error": str(exc)})
        except WorkloadError as exc:
            self.send({"op": "failed", "run": key, "kind": "workload", "error": str(exc)})
        except ValueError as exc:
            self.send({"op": "failed", "run": key, "kind": "value", "error": str(exc)})
        except Exception as exc:
            logger.exception("preparing run %s failed", key)
            self.send({"op": "failed", "run": key, "kind": "internal",
                       "error": type(exc).__name__})
        else:
            if key in self.closed:
                self.closed.discard(key)
                self._clean(prepare)
                return
            self.runs[key] = OpenRun(prepare, pickle.loads(message["sessions"]))
            self.send({"op": "opened", "run": key, "calibration": None if calibration is None
                       else calibration.model_dump(mode="json")})

    async def stage(self, key: int, run: OpenRun, stop: RunStop,
                    message: wire.Message) -> None:
        """Run one shard of one stage from the common start; then flush its samples and say
        how many requests it sent and why it stopped early, if it did; or, if the worker
        failed, why (the parent fails the run, as an exception fails it in-process)."""
        sends = 0
        try:
            shard: Shard = pickle.loads(message["shard"])
            assert shard.stage is not None
            clock = RunClock(int(message["clock_ns"]), pickle.loads(message["clock_wall"]))
            start_ns = int(message["start_ns"])
            limit = message.get("max_sends")
            limit_reason = str(message.get("limit_reason", "stopped at the run's request limit"))

            def prepare(seq: int, dialogue: Dialogue | None = None) -> Request:
                nonlocal sends
                sends += 1
                if limit is not None and sends >= limit:
                    stop.set(limit_reason)
                return run.prepare(seq, dialogue)

            def measured(sample: Sample) -> None:
                self.queue(key, sample)

            max_rate = message.get("max_rate")
            ctx = StageContext(clock=clock, seqs=shard.seqs(int(message["seq"])),
                               stage=int(message["index"]), on_sample=measured,
                               max_rate=None if max_rate is None else float(max_rate))
            offsets = shard.offsets() if isinstance(shard.stage, OpenStage) else None
            stage = shard.stage

            async def drive() -> tuple[list[Sample], float]:
                await spin_until_ns(start_ns)
                return await run_stage(stage, prepare, ctx, offsets=offsets,
                                       origin_ns=start_ns, sessions=run.sessions,
                                       shard=shard.deal)

            with quiet_gc():
                outcome = await unless_stopped(drive(), stop)
        except Exception as exc:
            logger.exception("stage %s of run %s failed", message.get("index"), key)
            self.flush()
            self.send({"op": "stage_done", "run": key, "sends": sends,
                       "error": type(exc).__name__})
            return
        self.flush()
        self.send({"op": "stage_done", "run": key, "sends": sends,
                   "stopped": stop.reason if outcome is None else None})

    def queue(self, key: int, sample: Sample) -> None:
        self.outbox.setdefault(key, []).append(wire.sample_row(sample))
        self.queued += 1
        self.queued_bytes += 128 + 9 * len(sample.measurement.itl_ms)
        if self.queued >= BATCH_SAMPLES or self.queued_bytes >= BATCH_BYTES:
            self.flush()
        elif self.flush_at is None:
            self.flush_at = asyncio.get_running_loop().call_later(BATCH_S, self.flush)

    def flush(self) -> None:
        if self.flush_at is not None:
            self.flush_at.cancel()
            self.flush_at = None
        for key, rows in self.outbox.items():
            self.send({"op": "samples", "run": key, "rows": rows})
        self.outbox = {}
        self.queued = self.queued_bytes = 0


def warm_clients(clients: HttpClients, target: Target, *, fresh: bool = False) -> None:
    """Create, on the event loop, the connection pool or httpx client the run will use (one
    opening a connection per request, with `fresh`), so the thread that prepares the run
    only looks it up."""
    if is_check(target.api_kind):
        clients.httpx(tls_verify=target.tls_verify, http2=target.http2, fresh=fresh)
    elif target.http2:
        clients.httpx(tls_verify=target.tls_verify, http2=True, fresh=fresh)
    else:
        clients.pool(tls_verify=target.tls_verify)


class ParentPipe(asyncio.Protocol):
    """Messages from the parent, decoded as bytes arrive; `closed` when the pipe ends."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.decoder = wire.unpacker()
        self.closed = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.decoder.feed(data)
        for message in self.decoder:
            if not isinstance(message, dict):
                continue
            try:
                self.worker.handle(message)
            except Exception:  # a message this worker cannot act on: say so, keep serving
                logger.exception("cannot handle %r from the parent", message.get("op"))

    def connection_lost(self, exc: Exception | None) -> None:  # noqa: ARG002
        if not self.closed.done():
            self.closed.set_result(None)


async def serve(in_fd: int, out_fd: int) -> None:
    loop = asyncio.get_running_loop()
    out, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(out_fd, "wb", 0))
    worker = Worker(write=out.write)
    pipe = ParentPipe(worker)
    await loop.connect_read_pipe(lambda: pipe, os.fdopen(in_fd, "rb", 0))
    gc.freeze()
    await pipe.closed
    for task in list(worker.tasks):
        task.cancel()
    await asyncio.gather(*worker.tasks, return_exceptions=True)
    await asyncio.gather(*worker.cleanups, *(finish(run.prepare)
                                             for run in worker.runs.values()),
                         return_exceptions=True)
    if worker.clients is not None:
        await worker.clients.aclose()
    out.close()


def log_handler(stream: TextIO) -> logging.Handler:
    """A worker's log handler: one line per record, as the service's text format (a dataset
    path or an error text with a newline cannot forge a line)."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(OneLineFormatter(
        f"sustain-worker[{os.getpid()}] %(levelname)s %(name)s: %(message)s"))
    return handler


def main() -> None:
    """Keep the pipe to the parent on private descriptors; stray prints go to stderr."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.basicConfig(level=logging.WARNING, handlers=[log_handler(sys.stderr)])
    in_fd, out_fd = os.dup(0), os.dup(1)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(2, 1)
    started = time.monotonic()
    uvloop.run(serve(in_fd, out_fd))
    logger.debug("worker ran %.0f s", time.monotonic() - started)


if __name__ == "__main__":
    main()
