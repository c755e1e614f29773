"""``Cleaner``: the background thread that applies both policies to every log of a
``LogManager`` every ``retention_check_interval_ms`` (Kafka's log.retention.check.interval.ms,
5 minutes by default), and expires idle producer ids on the same round. A failure in one
log is recorded and does not stop the others."""

from __future__ import annotations

import threading

from pylog.retention.compact import compact
from pylog.retention.delete import enforce_retention

DEFAULT_INTERVAL_MS = 300_000


class Cleaner:
    """Runs retention and compaction for every log of ``manager``, until ``stop()``."""

    def __init__(self, manager, interval_ms: int | None = None):
        self.manager = manager
        self.interval_ms = DEFAULT_INTERVAL_MS if interval_ms is None else interval_ms
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
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
            self.run_once()
            self._stop.wait(self.interval_ms / 1000.0)

    def run_once(self, now_ms: int | None = None) -> dict:
        """One round over every writable log; returns {(topic, partition): (deleted, cleaned)}."""
        out = {}
        for log in list(self.manager.logs()):
            if self._stop.is_set() and self.runs:
                break
            view = log.cleaner_view
            if view.read_only or view.closed:
                continue
            try:
                view.expire_producers(now_ms)
                deleted = enforce_retention(log, now_ms)
                cleaned = compact(log, now_ms) if log.config.compact else None
                out[(log.topic, log.partition)] = (deleted, cleaned)
            except Exception as e:  # keep cleaning the other logs; the error is kept for callers
                self.errors.append((log.path, e))
        self.runs += 1
        return out
