"""``Cleaner``: the background thread that applies both policies to a set of logs (every log
of a ``LogManager``, or those a client process's ``WriterPool`` holds), each every
``retention_check_interval_ms`` of its config (Kafka's log.retention.check.interval.ms, 5
minutes by default), and expires idle producer ids on the same round. A failure in one log
is recorded and does not stop the others."""

from __future__ import annotations

import threading
import time

from pylog.config import LogConfig
from pylog.retention.compact import compact
from pylog.retention.delete import enforce_retention

DEFAULT_INTERVAL_MS = LogConfig().retention_check_interval_ms
#: How long a client process's cleaner leaves a log it first sees (Kafka's log.initial.task.delay.ms),
#: or its interval if shorter.
INITIAL_DELAY_MS = 30_000


class Cleaner:
    """Runs retention and compaction over the logs ``logs()`` yields, until ``stop()``.

    ``logs``: a callable returning the logs of a round (``LogManager.logs``; a writer pool's
    ``held_logs``, which yields each under the lock appends take, so the round holds it).
    ``interval_ms``: one interval for every log; None: each log's own
    ``config.retention_check_interval_ms``. The thread wakes at the earliest time a log it saw
    is due. ``initial_delay_ms``: a log's first round comes that long (or its interval, if
    shorter) after the thread first sees it; 0 (a ``LogManager``'s): at once."""

    def __init__(self, logs, interval_ms: int | None = None, *, initial_delay_ms: int = 0):
        self._logs = logs
        self.interval_ms = interval_ms
        self.initial_delay_ms = initial_delay_ms
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._due: dict[str, float] = {}  # log path -> monotonic time of its next round (kept across hand-offs)
        self.runs = 0
        self.errors: list[tuple[str, Exception]] = []

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="pylog-cleaner", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Ask the thread to stop after the log it is on, and wait for it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _loop(self) -> None:
        while not self._stop.is_set():
            held = self._round()
            wake = min(held.values(), default=time.monotonic() + DEFAULT_INTERVAL_MS / 1000)
            self._stop.wait(max(wake - time.monotonic(), 0.001))

    def run_once(self, now_ms: int | None = None) -> dict:
        """One round over every writable log; returns {(topic, partition): (deleted, cleaned)}."""
        out = {}
        for log in self._logs():
            if self._stop.is_set() and self.runs:
                break
            if not (log.cleaner_view.read_only or log.cleaner_view.closed):
                self._clean(log, now_ms, out)
        self.runs += 1
        return out

    def _round(self) -> dict[str, float]:
        """Clean the logs that are due; returns {path: when next due} of every log seen."""
        seen = {}
        for log in self._logs():
            if self._stop.is_set() and self.runs:  # the first round is whole
                break
            if log.cleaner_view.read_only or log.cleaner_view.closed:
                continue
            interval_ms = log.config.retention_check_interval_ms if self.interval_ms is None else self.interval_ms
            first = time.monotonic() + min(self.initial_delay_ms, interval_ms) / 1000
            if self._due.setdefault(log.path, first) <= time.monotonic():
                self._clean(log, None, {})
                self._due[log.path] = time.monotonic() + interval_ms / 1000
            seen[log.path] = self._due.get(log.path, first)
        self.runs += 1
        return seen

    def _clean(self, log, now_ms: int | None, out: dict) -> None:
        try:
            log.cleaner_view.expire_producers(now_ms)
            deleted = enforce_retention(log, now_ms)
            cleaned = compact(log, now_ms) if log.config.compact else None
            out[(log.topic, log.partition)] = (deleted, cleaned)
        except Exception as e:  # keep cleaning the other logs; the error is kept for callers
            self.errors.append((log.path, e))
