"""``spark.read.format("pylog")`` finds the source by PySpark's own discovery, with no
``register()`` call, after the README's install (``pip install -e``) and after a regular
``pip install``: each installs the checkout into a fresh venv (which sees the packages of
the environment running the tests: a plain install, a venv or a conda env) and reads a log
from a new process run without ``PYTHONPATH``, so the checkout is importable only through
what the install put into the venv."""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pylog import Log, Record
from tests.spark.conftest import _java_ok

pytestmark = pytest.mark.spark

CHECKOUT = Path(__file__).resolve().parents[2]

READ_WITHOUT_REGISTER = textwrap.dedent("""
    import json, sys
    import pylog
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[1]").appName("pylog-discovery")
             .config("spark.ui.enabled", "false").config("spark.driver.bindAddress", "127.0.0.1")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    rows = spark.read.format("pylog").load(sys.argv[1]).select("offset", "value").collect()
    assert spark.read.format("pylog").load(sys.argv[1]).count() == len(rows)
    print(json.dumps({"pylog": pylog.__file__, "rows": sorted([r.offset, r.value.decode()] for r in rows)}))
    spark.stop()
""")

#: pyspark.sql.worker.lookup_data_sources writes: count, then (name, pickled source) each
LOOKUP = textwrap.dedent("""
    import io, json, struct
    import pylog
    from pyspark.sql.worker.lookup_data_sources import _main
    out = io.BytesIO()
    _main(io.BytesIO(), out)
    buf, pos, names = out.getvalue(), 4, []
    for _ in range(struct.unpack_from(">i", buf)[0]):
        n = struct.unpack_from(">i", buf, pos)[0]
        names.append(buf[pos + 4:pos + 4 + n].decode())
        pos += 4 + n
        pos += 4 + struct.unpack_from(">i", buf, pos)[0]
    print(json.dumps({"pylog": pylog.__file__, "sources": names}))
""")


def _isolated_env(venv: Path) -> dict:
    """The environment of a user's shell: no PYTHONPATH pointing at the checkout."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV")}
    python = str(venv / "bin" / "python")
    env.update(PYSPARK_PYTHON=python, PYSPARK_DRIVER_PYTHON=python, VIRTUAL_ENV=str(venv),
               PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def _install(tmp: Path, editable: bool) -> Path:
    """A venv that sees this environment's packages (pyspark, pyarrow, crc32c, ...: see
    :func:`_see_packages_of_this_environment`), with the checkout pip-installed into it."""
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    _see_packages_of_this_environment(venv)
    cmd = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-deps"]
    cmd += ["-e", str(CHECKOUT)] if editable else [str(CHECKOUT)]
    done = subprocess.run(cmd, cwd=tmp, env=_isolated_env(venv), capture_output=True, text=True, timeout=600)
    if done.returncode != 0 and "No matching distribution found for" in done.stderr:
        pytest.skip("pip cannot fetch the build requirements (setuptools, wheel): no package index reachable")
    assert done.returncode == 0, f"pip install failed:\n{done.stdout}\n{done.stderr}"
    return venv


def _see_packages_of_this_environment(venv: Path) -> None:
    """A ``.pth`` file in ``venv`` listing the site-packages directories of the interpreter
    running the tests, after the venv's own. ``venv --system-site-packages`` would show the
    base interpreter's instead, which inside a venv or a conda env lack pyspark and crc32c.
    The directories are listed, not added as site directories, so their ``.pth`` files (this
    environment's own install of pylog) do not run: pylog comes from the venv's install."""
    dirs = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    lines = [d for d in dirs if os.path.isdir(d) and not Path(d).resolve().is_relative_to(CHECKOUT)]
    ask = "import sysconfig; print(sysconfig.get_path('purelib'))"
    purelib = subprocess.run([str(venv / "bin" / "python"), "-c", ask], check=True, capture_output=True, text=True,
                             timeout=60).stdout.strip()
    (Path(purelib) / "this_environment.pth").write_text("".join(f"{d}\n" for d in lines))


def _error_lines(stderr: str) -> str:
    """The Python-side error of a failed Spark run, not the Java stack under it."""
    lines = [line for line in stderr.splitlines() if not line.startswith(("\tat ", "\t..."))]
    return "\n".join(lines[-40:])


def test_after_pip_install_e_a_fresh_spark_session_reads_format_pylog(tmp_path):
    """The README's install, then ``spark.read.format("pylog")`` in a new process."""
    pytest.importorskip("pyspark", reason="pyspark is not installed (extra 'spark')")
    pytest.importorskip("pyarrow", reason="pyarrow is not installed (extra 'spark')")
    problem = _java_ok()
    if problem:
        pytest.skip(problem)
    with Log.open(tmp_path / "root" / "t-0") as log:
        log.append([Record(b"v%d" % i, timestamp=1000 + i) for i in range(5)])
    venv = _install(tmp_path, editable=True)
    out = _run(tmp_path, venv, READ_WITHOUT_REGISTER, str(tmp_path / "root"))
    assert Path(out["pylog"]).is_relative_to(CHECKOUT), out["pylog"]
    assert out["rows"] == [[i, f"v{i}"] for i in range(5)]
    assert out["stderr"].count("SlowReaderWarning: ") == 1, out["stderr"]  # once: the session has no jar


def test_after_a_regular_pip_install_pysparks_lookup_finds_pylog(tmp_path):
    """A wheel install, checked with the worker code PySpark runs to discover sources (the
    JVM side is the same as above, so no Spark session is started)."""
    pytest.importorskip("pyspark", reason="pyspark is not installed (extra 'spark')")
    pytest.importorskip("pyarrow", reason="pyarrow is not installed (extra 'spark')")
    venv = _install(tmp_path, editable=False)
    out = _run(tmp_path, venv, LOOKUP)
    assert Path(out["pylog"]).is_relative_to(venv), out["pylog"]
    assert "pylog" in out["sources"]


def _run(tmp: Path, venv: Path, script: str, *args: str) -> dict:
    """Run ``script`` with the venv's interpreter from ``tmp``; return its last line, JSON,
    with its stderr under ``"stderr"``."""
    path = tmp / "script.py"
    path.write_text(script)
    done = subprocess.run([str(venv / "bin" / "python"), str(path), *args], cwd=tmp, env=_isolated_env(venv),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, _error_lines(done.stderr)
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "stderr": done.stderr}
