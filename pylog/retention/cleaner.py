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


class Cleaner:
    """Runs retention and compaction over the logs ``logs()`` yields, until ``stop()``.

    ``logs``: a callable returning the logs of a round (``LogManager.logs``; a writer pool's
    ``held_logs``, which yields each under the lock appends take, so the round holds it).
    ``interval_ms``: one interval for every log; None: each log's own
    ``config.retention_check_interval_ms``. The thread wakes at the earliest time a log it saw
    is due; a log first seen while it sleeps is cleaned at that wake-up (its first round)."""

    def __init__(self, logs, interval_ms: int | None = None):
        self._logs = logs
        self.interval_ms = interval_ms
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._due: dict[str, float] = {}  # log path -> monotonic time of its next round
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
            self._round(due_only=True)
            wake = min(self._due.values(), default=time.monotonic() + DEFAULT_INTERVAL_MS / 1000)
            self._stop.wait(max(wake - time.monotonic(), 0.001))

    def run_once(self, now_ms: int | None = None) -> dict:
        """One round over every writable log; returns {(topic, partition): (deleted, cleaned)}."""
        return self._round(now_ms)

    def _round(self, now_ms: int | None = None, *, due_only: bool = False) -> dict:
        out = {}
        due: dict[str, float] = {}
        for log in self._logs():
            if self._stop.is_set() and self.runs:
                break
            view = log.cleaner_view
            if view.read_only or view.closed:
                continue
            due[log.path] = self._due.get(log.path, 0.0)
            if due_only and due[log.path] > time.monotonic():
                continue
            interval_ms = log.config.retention_check_interval_ms if self.interval_ms is None else self.interval_ms
            due[log.path] = time.monotonic() + interval_ms / 1000
            try:
                view.expire_producers(now_ms)
                deleted = enforce_retention(log, now_ms)
                cleaned = compact(log, now_ms) if log.config.compact else None
                out[(log.topic, log.partition)] = (deleted, cleaned)
            except Exception as e:  # keep cleaning the other logs; the error is kept for callers
                self.errors.append((log.path, e))
        self._due = due  # the logs of this round only: one handed over or closed is forgotten
        self.runs += 1
        return out
