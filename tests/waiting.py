"""Waiting in tests: on a condition, with a deadline, never for a fixed time."""

from __future__ import annotations

import time


def wait_until(condition, what: str = "condition", timeout_s: float = 30.0) -> None:
    """Return once ``condition()`` is true; fail naming ``what`` after ``timeout_s``. Checks
    every few milliseconds, so a slow machine only makes it wait longer."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.005)


def poll_until(consumer, condition, what: str = "condition", timeout_s: float = 30.0) -> None:
    """``consumer.poll`` (100 ms at most each) until ``condition()`` is true (a group
    joined, a position reached); fail naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        consumer.poll(100)
