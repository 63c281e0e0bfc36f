"""One measurement worker process and each run's conversation with it.

A worker is a child process (workers/child.py) speaking the wire protocol (workers/wire.py) on
its stdin and stdout; `RunChannel` is one run's side of that conversation, which the conductor
drives stage by stage. The pool (workers/pool.py) starts, leases and replaces these.
"""

from __future__ import annotations

import asyncio
import logging
import os
import pickle
import signal
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from sustain.probes.client.secret_policy import SecretPolicy, scrubbed_environment
from sustain.probes.client.secrets import SecretUnavailableError
from sustain.probes.client.target import Target
from sustain.probes.load.clock import RunClock
from sustain.probes.measure.prompt_tokens import PromptCalibration
from sustain.probes.measure.sample import Sample
from sustain.probes.workers import wire
from sustain.probes.workers.shards import Shard
from sustain.probes.workload.dataset import DatasetError, DatasetPolicy
from sustain.probes.workload.sessions import Sessions
from sustain.probes.workload.spec import Workload, WorkloadError
from sustain.probes.workload.traces import Replay

logger = logging.getLogger(__name__)

START_TIMEOUT_S = 60.0
"""A worker that has not said it is ready by then is killed (the run fails)."""
STOP_TIMEOUT_S = 5.0
"""At close, how long a worker may take to exit after its stdin closes."""


def worker_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment a worker starts with: the service's, without sustain's own settings
    (its database URL and admin key among them) and the variables database clients read
    credentials from (secret_policy.FORBIDDEN_ENV, which no secret reference may name)."""
    return scrubbed_environment(environ)


class WorkerDiedError(Exception):
    """The worker measuring (part of) a run exited; the message says how."""


def exit_reason(pid: int, code: int | None) -> str:
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"measurement worker (pid {pid}) was killed by {name}"
    return f"measurement worker (pid {pid}) exited with code {code}"


@dataclass(frozen=True, slots=True)
class StageDone:
    sends: int
    """Requests the shard sent (its sequence numbers used), warmup included."""
    stopped: str | None
    """Why the shard ended its stage early, if it did (the run's request limit, a stop)."""


class RunChannel:
    """One run's conversation with one worker: open the run there, run shards of its stages
    one at a time, stop the one in progress, close. Samples decode on the run's clock and go
    to `on_sample` as their batches arrive."""

    def __init__(self, worker: WorkerProcess, key: int) -> None:
        self.worker = worker
        self.key = key
        self.clock: RunClock | None = None
        self.on_sample: Callable[[Sample], None] = lambda _sample: None
        self._opened: asyncio.Future[PromptCalibration | None] | None = None
        self._stage: asyncio.Future[StageDone] | None = None
        self.closed = False
        self.failed: Exception | None = None
        """Why this conversation cannot go on (its worker died); raised by every call."""

    def _future(self) -> asyncio.Future[Any]:
        """A future for the next answer; raises at once when the worker is already gone
        (a message to a dead worker would never be answered)."""
        if self.failed is None and self.worker.dead is not None:
            self.failed = self.worker.dead
        if self.failed is not None:
            raise self.failed
        return asyncio.get_running_loop().create_future()

    async def open(self, target: Target, workload: Workload, secrets: SecretPolicy,
                   datasets: DatasetPolicy, replay: Replay | None = None,
                   sessions: Sessions | None = None,
                   calibration: PromptCalibration | None = None) -> PromptCalibration | None:
        """Prepare the run on the worker, its synthetic prompts sized by `calibration` when
        given (else by a fit the worker makes or holds), and return how they are sized (None
        for prompts of given text); raises what preparing raises in-process
        (SecretUnavailableError, DatasetError, ValueError) or WorkerDiedError."""
        self._opened = self._future()
        self.worker.send({"op": "open", "run": self.key, "target": pickle.dumps(target),
                          "workload": pickle.dumps(workload),
                          "secrets": pickle.dumps(secrets.without_values()),
                          "datasets": pickle.dumps(datasets), "replay": pickle.dumps(replay),
                          "sessions": pickle.dumps(sessions),
                          "calibration": None if calibration is None
                          else pickle.dumps(calibration)})
        return await self._opened

    async def stage(self, index: int, shard: Shard, seq: int, start_ns: int,
                    max_sends: int | None, limit_reason: str,
                    max_rate: float | None = None) -> StageDone:
        """Run `shard` of stage `index` from `start_ns` (perf_counter_ns), its sequence
        numbers from `seq`, sending at most `max_sends` requests, and a closed loop at most
        `max_rate` requests/s."""
        assert self.clock is not None
        self._stage = self._future()
        self.worker.send({"op": "stage", "run": self.key, "index": index,
                          "shard": pickle.dumps(shard), "seq": seq, "start_ns": start_ns,
                          "clock_ns": self.clock.origin_ns,
                          "clock_wall": pickle.dumps(self.clock.origin_wall),
                          "max_sends": max_sends, "limit_reason": limit_reason,
                          "max_rate": max_rate})
        return await self._stage

    def stop(self, reason: str) -> None:
        """End the stage in progress (its samples so far are kept)."""
        if self._stage is not None and not self._stage.done():
            self.worker.send({"op": "stop", "run": self.key, "reason": reason})

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.worker.send({"op": "close", "run": self.key})
            self.worker.channels.pop(self.key, None)

    def receive(self, message: wire.Message) -> None:
        op = message["op"]
        if op == "samples":
            assert self.clock is not None
            for row in message["rows"]:
                self.on_sample(wire.row_sample(row, self.clock))
        elif op == "stage_done" and self._stage is not None and not self._stage.done():
            if message.get("error") is not None:
                self._stage.set_exception(RuntimeError(
                    f"internal error in the measurement worker: {message['error']}"))
                return
            stopped = message.get("stopped")
            self._stage.set_result(StageDone(int(message["sends"]),
                                             None if stopped is None else str(stopped)))
        elif op == "opened" and self._opened is not None and not self._opened.done():
            self._opened.set_result(calibration_of(message.get("calibration")))
        elif op == "failed" and self._opened is not None and not self._opened.done():
            self._opened.set_exception(setup_error(str(message["kind"]),
                                                   str(message["error"])))

    def fail(self, error: Exception) -> None:
        self.failed = error
        for future in (self._opened, self._stage):
            if future is not None and not future.done():
                future.set_exception(error)


def calibration_of(value: Any) -> PromptCalibration | None:
    """How a worker sized a run's prompts, from its plain values; None for none (or values
    that are not one: the run then reports none)."""
    if value is None:
        return None
    try:
        return PromptCalibration.model_validate(value)
    except ValidationError:
        logger.warning("a measurement worker sent a prompt calibration that is not one")
        return None


def setup_error(kind: str, text: str) -> Exception:
    """The exception preparing a run raised in the worker, raised again in the parent."""
    if kind == "secret":
        return SecretUnavailableError(text)
    if kind == "dataset":
        return DatasetError(text)
    if kind == "workload":
        return WorkloadError(text)
    if kind == "value":
        return ValueError(text)
    return RuntimeError(f"internal error in the measurement worker: {text}")


class WorkerProcess:
    """One worker process and the reader of its pipe."""

    def __init__(self, process: asyncio.subprocess.Process,
                 on_exit: Callable[[WorkerProcess], None]) -> None:
        self.process = process
        self.pid = process.pid
        self.channels: dict[int, RunChannel] = {}
        self.dead: WorkerDiedError | None = None
        self._on_exit = on_exit
        self._ready = asyncio.get_running_loop().create_future()
        self._reader = asyncio.create_task(self._read(), name=f"worker-{self.pid}")

    @property
    def load(self) -> int:
        """Runs open on this worker."""
        return len(self.channels)

    @classmethod
    async def start(cls, config: wire.Message, on_exit: Callable[[WorkerProcess], None]
                    ) -> WorkerProcess:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "sustain.probes.workers.child",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            env=worker_environment(os.environ))
        worker = cls(process, on_exit)
        worker.send({"op": "config", **config})
        try:
            async with asyncio.timeout(START_TIMEOUT_S):
                await asyncio.shield(worker._ready)
        except BaseException:
            worker.kill()
            raise
        return worker

    def channel(self, key: int) -> RunChannel:
        channel = self.channels[key] = RunChannel(self, key)
        return channel

    def send(self, message: wire.Message) -> None:
        stdin = self.process.stdin
        if self.dead is None and stdin is not None and not stdin.is_closing():
            stdin.write(wire.pack(message))

    async def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        decoder = wire.unpacker()
        try:
            while data := await stdout.read(1 << 16):
                decoder.feed(data)
                for message in decoder:
                    self._dispatch(message)
        except Exception:  # a malformed message: this worker cannot be trusted to go on
            logger.exception("measurement worker %s sent what it cannot have; stopping it",
                             self.pid)
            self.kill()
        code = await self.process.wait()
        self.dead = WorkerDiedError(exit_reason(self.pid, code))
        for channel in list(self.channels.values()):
            channel.fail(self.dead)
        if not self._ready.done():
            self._ready.set_exception(self.dead)
        self._on_exit(self)

    def _dispatch(self, message: Any) -> None:
        if message.get("op") == "ready":
            if not self._ready.done():
                self._ready.set_result(None)
            return
        channel = self.channels.get(message.get("run"))
        if channel is not None:
            channel.receive(message)

    def kill(self) -> None:
        if self.process.returncode is None:
            self.process.kill()

    async def close(self) -> None:
        """Close its stdin (it stops its runs and exits); kill it if it lingers."""
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            async with asyncio.timeout(STOP_TIMEOUT_S):
                await asyncio.shield(self._reader)
        except TimeoutError:
            self.kill()
            await self._reader
