"""Which Python serves a Spark session: the driver's own interpreter, not the ``python3``
that ``PATH`` names. A program run as ``venv/bin/python app.py`` without activating the venv
(cron, systemd, an IDE) finds on ``PATH`` a ``python3`` that lacks pylog; here that is a bare
venv put first on ``PATH``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pylog import Log, Record
from tests.spark.conftest import _java_ok, read_with

pytestmark = pytest.mark.spark

READ_WITH_SESSION = textwrap.dedent("""
    import json, sys
    import pylog.spark
    spark = pylog.spark.session("local[1]")
    spark.sparkContext.setLogLevel("ERROR")
    df = spark.read.format("pylog").option("reader", "jvm").load(sys.argv[1])
    print(json.dumps({"rows": sorted(r.value.decode() for r in df.select("value").collect())}))
    spark.stop()
""")


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> Path:
    """A real interpreter that cannot import pylog (nor pyspark): a venv with nothing in it."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    return venv / "bin" / "python3"


def _log_dir(root: Path, n: int = 3) -> Path:
    with Log.open(root / "t-0") as log:
        log.append([Record(b"v%d" % i, timestamp=1000 + i) for i in range(n)])
    return root


def test_session_from_an_unactivated_venv_reads_with_the_jvm_reader(tmp_path, bare_python):
    """``python app.py`` with another ``python3`` first on PATH: ``pylog.spark.session()``
    used to fail with DATA_SOURCE_ALREADY_EXISTS (Spark looked for Python sources with that
    ``python3``), and the JVM reader's planner ran it too."""
    pytest.importorskip("pyspark", reason="pyspark is not installed (extra 'spark')")
    problem = _java_ok()
    if problem:
        pytest.skip(problem)
    from pylog.spark import jar_path
    if jar_path() is None:
        pytest.skip("no JVM reader: pylog's jar cannot be built here (no JDK)")
    root = _log_dir(tmp_path / "root")
    script = tmp_path / "app.py"
    script.write_text(READ_WITH_SESSION)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV")}
    env["PATH"] = f"{bare_python.parent}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run([sys.executable, str(script), str(root)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, "\n".join(line for line in done.stderr.splitlines()[-40:]
                                           if not line.startswith("\tat "))
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"rows": ["v0", "v1", "v2"]}


def test_a_planner_that_cannot_start_names_its_interpreter_and_why(spark, tmp_path, bare_python):
    from pylog.spark import PYTHON_CONF, jar_path
    if jar_path(build=False) is None:
        pytest.skip("no JVM reader: pylog's jar cannot be built here (no JDK)")
    root = _log_dir(tmp_path / "root")
    own = spark.conf.get(PYTHON_CONF)
    spark.conf.set(PYTHON_CONF, str(bare_python))
    try:
        with pytest.raises(Exception) as failed:
            read_with(spark, "jvm").load(str(root)).count()
    finally:
        spark.conf.set(PYTHON_CONF, own)
    message = str(failed.value)
    assert str(bare_python) in message and "ModuleNotFoundError: No module named" in message, message
    assert read_with(spark, "jvm").load(str(root)).count() == 3  # its own interpreter again
