"""Shared benchmark machinery: every suite measures pylog and its peers in the same run
and records a ratio against a goal; the session ends with one table of ratios, written
to ``benches/results.json`` as well (docs/PERFORMANCE.md is made from it).

Run: ``pytest benches/ --benchmark-only`` (``PYLOG_BENCH_LARGE=1`` adds the 10M-record sizes).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

LARGE = os.environ.get("PYLOG_BENCH_LARGE") == "1"
RESULTS: list[dict] = []
FIGURES: dict[str, dict] = {}


def best_of(fn, repeat: int = 5, number: int = 1) -> float:
    """Fastest of ``repeat`` timings of ``number`` calls, in seconds per call."""
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t) / number)
    return best


def record_ratio(name: str, ratio: float, goal: float | None, detail: str = "", higher_is_better: bool = True):
    """A ratio (pylog vs a peer or a limit), checked against its goal in the final table."""
    ok = None if goal is None else (ratio >= goal if higher_is_better else ratio <= goal)
    RESULTS.append({"name": name, "ratio": round(ratio, 3), "goal": goal, "met": ok, "detail": detail,
                    "higher_is_better": higher_is_better})


def record_figure(name: str, **values):
    """A raw figure (throughput, latency, memory) for the report and the plots."""
    FIGURES[name] = values


@pytest.fixture
def tmp_dir(tmp_path):
    return tmp_path


def pytest_terminal_summary(terminalreporter):
    if not RESULTS and not FIGURES:
        return
    tr = terminalreporter
    tr.section("pylog ratios (same run, same machine)")
    for r in RESULTS:
        goal = "" if r["goal"] is None else (">= " if r["higher_is_better"] else "<= ") + f"{r['goal']}"
        verdict = "" if r["met"] is None else ("MET" if r["met"] else "MISSED")
        tr.write_line(f"{r['name']:<58} {r['ratio']:>9.2f}x  goal {goal:<8} {verdict:<7} {r['detail']}")
    if FIGURES:
        tr.section("pylog figures")
        for name, values in FIGURES.items():
            tr.write_line(f"{name:<58} " + ", ".join(f"{k}={v}" for k, v in values.items()))
    out = Path(__file__).with_name("results.json")
    out.write_text(json.dumps({"ratios": RESULTS, "figures": FIGURES, "machine": machine()}, indent=1))


def machine() -> dict:
    import platform
    import numpy
    return {"python": platform.python_version(), "numpy": numpy.__version__, "cpus": os.cpu_count(),
            "platform": platform.platform(), "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)}
