"""Shared fixtures: where the Kafka samples live, and temporary copies of them."""

from __future__ import annotations

import compileall
import os
import shutil
from pathlib import Path

import pytest

from tests.s3_endpoint import s3  # noqa: F401  (the loopback S3 endpoint, for every test)

_HERE = Path(__file__).resolve().parent


def pytest_addoption(parser):
    parser.addoption("--soak", action="store_true", default=False,
                     help="run the long crash/fault soak (hundreds of trials) instead of the quick CI count")


def pytest_sessionstart(session):
    """pylog's bytecode written once, as an install writes it: the hundreds of ``pylog`` and
    ``python`` processes the tests start then load it rather than each compiling pylog's
    modules again where the environment turns bytecode writing off (PYTHONDONTWRITEBYTECODE;
    ~0.15 s a process here)."""
    compileall.compile_dir(_HERE.parent / "pylog", quiet=2)


@pytest.fixture
def soak(request) -> bool:
    return request.config.getoption("--soak")


def samples_root() -> Path | None:
    """``$PYLOG_KAFKA_SAMPLES``, else ``../shared/kafka-samples`` beside the checkout."""
    env = os.environ.get("PYLOG_KAFKA_SAMPLES")
    candidates = [Path(env)] if env else []
    candidates.append(_HERE.parent.parent / "shared" / "kafka-samples")
    for c in candidates:
        if (c / "expected").is_dir():
            return c
    return None


SAMPLES = samples_root()
needs_samples = pytest.mark.skipif(
    SAMPLES is None,
    reason="Kafka samples not found: set PYLOG_KAFKA_SAMPLES or put shared/kafka-samples beside the checkout")


def sample_logs() -> list[Path]:
    """Every ``.log`` under the samples that has an expected decoding."""
    if SAMPLES is None:
        return []
    out = []
    for exp in sorted((SAMPLES / "expected").rglob("*.log.jsonl.gz")):
        rel = exp.relative_to(SAMPLES / "expected")
        out.append(SAMPLES / str(rel)[: -len(".jsonl.gz")])
    return out


def sample_partitions() -> list[Path]:
    """Every partition directory under ``real/`` (directories holding ``.log`` files)."""
    if SAMPLES is None:
        return []
    return sorted({p.parent for p in (SAMPLES / "real").rglob("*.log")})


@pytest.fixture
def copy_sample(tmp_path):
    """Copy a sample partition directory into tmp_path and return the copy's path."""

    def _copy(src: Path) -> Path:
        dst = tmp_path / src.name
        shutil.copytree(src, dst)
        return dst

    return _copy
