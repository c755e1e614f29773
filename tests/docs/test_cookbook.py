"""Every snippet of docs/cookbook.md runs as written in an empty directory: each in a fresh
interpreter, except the Spark ones (a ```python spark fence), which run in this process on
the test suite's one SparkSession, as starting another costs a minute here. The broker-dir
recipe gets a copy of a Kafka sample log dir as ``kafka-data``; the tiered-storage one a fresh
bucket of the loopback S3 endpoint for ``s3://my-bucket``, whose address and credentials it
finds in the environment (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ...), as a user's would."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import SAMPLES
from tests.s3_endpoint import ACCESS_KEY, REGION, SECRET_KEY
from tests.spark.conftest import spark  # noqa: F401 - the shared session, a fixture

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
        out.append(pytest.param(m[2], bool(m[1]), id=name, marks=marks))
    return out


def test_the_cookbook_has_a_snippet_per_recipe():
    assert [p.id for p in snippets()] == ["an-event-log-with-a-live-tail", "inspecting-a-broker-s-data-dir",
                                         "retention-and-compaction", "transactions", "arrow-and-pandas",
                                         "spark-batch-and-streaming",
                                         "spark-a-stream-from-pylog-to-pylog-exactly-once",
                                         "tiered-storage-in-a-bucket"]


@pytest.mark.parametrize("code, on_spark", snippets())
def test_cookbook_snippet_runs(code, on_spark, tmp_path, request, monkeypatch, capsys):
    if on_spark:
        request.getfixturevalue("spark")
        monkeypatch.chdir(tmp_path)
        # getOrCreate() returns the running session; it stays up for the other Spark tests
        exec(compile(code.replace("spark.stop()", ""), "docs/cookbook.md", "exec"), {"__name__": "__main__"})
        assert capsys.readouterr().out.strip(), "a recipe shows its result"
        return
    env = {**os.environ, "PYTHONPATH": str(COOKBOOK.parents[1])}
    if "s3://my-bucket" in code:  # the loopback S3 endpoint, given as a user's environment gives it
        s3 = request.getfixturevalue("s3")
        code = code.replace("s3://my-bucket", f"s3://{s3.bucket()}")
        env.update(AWS_ENDPOINT_URL=s3.endpoint_url, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY,
                   AWS_DEFAULT_REGION=REGION)
    if "kafka-data" in code:
        if SAMPLES is None:
            pytest.skip("Kafka samples not found: the broker-dir recipe reads a copy of one")
        shutil.copytree(SAMPLES / "real" / "gzip-topic", tmp_path / "kafka-data")
    (tmp_path / "snippet.py").write_text(code)
    done = subprocess.run([sys.executable, "snippet.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip(), "a recipe shows its result"
