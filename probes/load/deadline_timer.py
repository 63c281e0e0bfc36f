"""Waiting for a request's send time to within the machine's wake-up latency, without spinning
the event loop.

The loop's own timers have millisecond resolution (uvloop's clock) and may fire up to a
millisecond early, so a precise wait on them alone ends with a spin of zero-length sleeps: a
loop turn after another for up to a millisecond before every paced send (at 200 requests/s,
about a sixth of the client's CPU). A Linux timerfd armed at the deadline on CLOCK_MONOTONIC
(the clock of `time.perf_counter_ns`) wakes the loop once, when the deadline has passed: one
system call to arm it, one read when it fires. Each timer holds one descriptor for its life,
reused by every wait, and gives it back on `close`. Where timerfd is missing (not Linux), the
timer falls back to the loop's timers and the spin (`spin_until_ns`)."""

from __future__ import annotations

import asyncio
import ctypes
import os
import time
from collections.abc import Callable
from functools import cache

CLOCK_MONOTONIC = 1
TFD_TIMER_ABSTIME = 1
NS_PER_S = 1_000_000_000


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


TimerfdCalls = tuple[Callable[[int, int], int], Callable[..., int]]


@cache
def timerfd_calls() -> TimerfdCalls | None:
    """libc's timerfd_create and timerfd_settime, or None where there are none."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        create, settime = libc.timerfd_create, libc.timerfd_settime
    except (OSError, AttributeError):
        return None
    create.argtypes, create.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    settime.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(_Itimerspec),
                        ctypes.c_void_p]
    settime.restype = ctypes.c_int
    return create, settime


async def spin_until_ns(deadline_ns: int) -> None:
    """Sleep until perf_counter_ns() reaches the deadline on the loop's timers: they can wake
    up to a millisecond early, so sleep again for what is left (a zero-length sleep, a loop
    turn, when under half a millisecond is left). Never returns before the deadline."""
    while (remaining := deadline_ns - time.perf_counter_ns()) > 0:  # noqa: ASYNC110
        await asyncio.sleep(remaining / 1e9)


class DeadlineTimer:
    """Sleeps until perf_counter_ns() deadlines, one wait at a time, never returning before
    one. Made on the loop it serves; `close` gives its descriptor back (also as a context
    manager)."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop or asyncio.get_running_loop()
        self._fd = -1
        self._waiter: asyncio.Future[None] | None = None
        self._spec = _Itimerspec()
        self._settime: Callable[..., int] | None = None
        calls = timerfd_calls()
        if calls is not None:
            create, self._settime = calls
            fd = create(CLOCK_MONOTONIC, os.O_NONBLOCK | os.O_CLOEXEC)
            if fd >= 0:
                self._fd = fd
                self._loop.add_reader(fd, self._fired)

    @property
    def precise(self) -> bool:
        """Whether waits end on a timerfd (else on the loop's timers and a spin)."""
        return self._fd >= 0

    def _fired(self) -> None:
        try:
            os.read(self._fd, 8)  # the expiry count: read, so the descriptor is quiet again
        except BlockingIOError:
            return
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _arm(self, deadline_ns: int) -> bool:
        value = self._spec.it_value
        value.tv_sec, value.tv_nsec = divmod(deadline_ns, NS_PER_S)
        assert self._settime is not None
        return self._settime(self._fd, TFD_TIMER_ABSTIME, ctypes.byref(self._spec), None) == 0

    async def sleep_until(self, deadline_ns: int) -> None:
        """Return once perf_counter_ns() >= deadline_ns (at once for a deadline passed). An
        expiry left over from a cancelled wait only wakes the next one to look at the clock
        and sleep on."""
        if self._fd < 0:
            await spin_until_ns(deadline_ns)
            return
        if self._waiter is not None:
            raise RuntimeError("a DeadlineTimer serves one wait at a time")
        while time.perf_counter_ns() < deadline_ns:
            if not self._arm(deadline_ns):
                await spin_until_ns(deadline_ns)
                return
            waiter = self._waiter = self._loop.create_future()
            try:
                await waiter
            finally:
                self._waiter = None

    def close(self) -> None:
        if self._fd >= 0:
            self._loop.remove_reader(self._fd)
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> DeadlineTimer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
