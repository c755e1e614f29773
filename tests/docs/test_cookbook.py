"""Every snippet of docs/cookbook.md runs as written, each in a fresh interpreter in an
empty directory (a ```python spark fence marks the Spark ones; the broker-dir recipe gets a
copy of a Kafka sample log dir as ``kafka-data``)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import SAMPLES

COOKBOOK = Path(__file__).resolve().parents[2] / "docs" / "cookbook.md"
FENCE = re.compile(r"^```python( spark)?\n(.*?)^```$", re.S | re.M)


def snippets() -> list:
    """One pytest param per snippet, named after its section, Spark ones marked."""
    text = COOKBOOK.read_text()
    out = []
    for m in FENCE.finditer(text):
        section = re.findall(r"^## (.+)$", text[:m.start()], re.M)[-1]
        name = re.sub(r"\W+", "-", section.lower()).strip("-")
        marks = [pytest.mark.spark] if m[1] else []
        out.append(pytest.param(m[2], id=name, marks=marks))
    return out


def test_the_cookbook_has_a_snippet_per_recipe():
    assert [p.id for p in snippets()] == ["an-event-log-with-a-live-tail", "inspecting-a-broker-s-data-dir",
                                         "retention-and-compaction", "transactions", "spark-batch-and-streaming"]


@pytest.mark.parametrize("code", snippets())
def test_cookbook_snippet_runs(code, tmp_path):
    if "kafka-data" in code:
        if SAMPLES is None:
            pytest.skip("Kafka samples not found: the broker-dir recipe reads a copy of one")
        shutil.copytree(SAMPLES / "real" / "gzip-topic", tmp_path / "kafka-data")
    if "pyspark" in code:
        pytest.importorskip("pyspark", reason="pyspark is not installed (extra 'spark')")
    (tmp_path / "snippet.py").write_text(code)
    env = {**os.environ, "PYTHONPATH": str(COOKBOOK.parents[1])}
    done = subprocess.run([sys.executable, "snippet.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip(), "a recipe shows its result"
