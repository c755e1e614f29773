"""The test run's own configuration: third-party deprecation warnings are filtered by the
module that raises them (pyproject.toml), while a warning from anywhere else still shows."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PROBE = '''
import warnings

def test_kafka_python_reads_its_schemas():
    from kafka.protocol.schemas import load_json
    assert load_json("AddOffsetsToTxnRequest")["name"] == "AddOffsetsToTxnRequest"

def test_our_own_deprecation_still_shows():
    warnings.warn("pylog's own deprecation", DeprecationWarning)
'''


def test_third_party_deprecations_are_filtered_by_module_and_ours_are_not(tmp_path):
    pytest.importorskip("kafka", reason="kafka-python is not installed (extra 'dev')")
    (tmp_path / "test_probe.py").write_text(PROBE)
    done = subprocess.run([sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "--rootdir",
                           str(tmp_path), "-p", "no:cacheprovider", "-q", str(tmp_path / "test_probe.py")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stdout
    assert "pylog's own deprecation" in done.stdout
    assert "2 passed, 1 warning" in done.stdout, done.stdout
