"""The JVM reader of ``format("pylog")``: its Java sources (``java/``) and their build.

The jar is built on first use, from the installed pyspark's own jars, into a cache keyed by
the sources' hash and the Spark version (docs/spark.md, "The JVM reader"): pip builds pylog
in an isolated environment without pyspark, and a Spark upgrade needs a new build anyway.
Without a JDK (``javac``) or pyspark there is no jar: one notice on stderr, and the Python
source serves every query.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

SOURCES = Path(__file__).parent / "java"
PROVIDER = "pylog.spark.PylogProvider"
SERVICE = "META-INF/services/org.apache.spark.sql.sources.DataSourceRegister"
_noticed = False


def cache_dir() -> Path:
    """Where built jars live: ``$PYLOG_CACHE_DIR``, else ``$XDG_CACHE_HOME/pylog``, else ``~/.cache/pylog``."""
    if os.environ.get("PYLOG_CACHE_DIR"):
        return Path(os.environ["PYLOG_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pylog"


def _spark() -> tuple[str, Path] | None:
    """(version, jars dir) of the installed pyspark, or None."""
    try:
        import pyspark
    except ImportError:
        return None
    jars = Path(pyspark.__file__).parent / "jars"
    return (pyspark.__version__, jars) if jars.is_dir() else None


def _javac() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "javac"), os.X_OK):
        return os.path.join(home, "bin", "javac")
    return shutil.which("javac")


def jar_name(spark_version: str) -> str:
    """The jar's file name: changes with any source file and with the Spark version."""
    digest = hashlib.sha256(spark_version.encode())
    for src in sorted(SOURCES.glob("*.java")):
        digest.update(src.name.encode() + b"\0" + src.read_bytes())
    return f"pylog-spark-{spark_version}-{digest.hexdigest()[:16]}.jar"


def jar_path(*, build: bool = True) -> str | None:
    """The path of pylog's Spark jar (for ``spark.jars``), built now if needed and ``build``;
    None without pyspark or a JDK (then a one-line notice on stderr, once per process).
    Cost: a hash of the sources; the first call per source/Spark version compiles (~10 s)."""
    spark = _spark()
    if spark is None:
        return _notice("pyspark is not installed")
    jar = cache_dir() / jar_name(spark[0])
    if jar.is_file():
        return str(jar)
    if not build:
        return None
    javac = _javac()
    if javac is None:
        return _notice("no JDK (javac) found")
    build_jar(javac, spark[1], jar)
    return str(jar)


def _notice(why: str) -> None:
    global _noticed
    if not _noticed:
        _noticed = True
        print(f"pylog: {why}, so no JVM reader: format('pylog') uses the Python source", file=sys.stderr)
    return None


def build_jar(javac: str, spark_jars: Path, jar: Path) -> None:
    """Compile the sources against ``spark_jars`` and write ``jar`` atomically (a concurrent
    build of the same jar is harmless: the last rename wins, both are identical)."""
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pylog-jar-", dir=jar.parent) as tmp:
        classes = Path(tmp) / "classes"
        cmd = [javac, "--release", "17", "-nowarn", "-d", str(classes), "-cp", str(spark_jars / "*"),
               *map(str, sorted(SOURCES.glob("*.java")))]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"building pylog's Spark jar failed:\n{done.stdout}{done.stderr}")
        out = Path(tmp) / jar.name
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
            z.writestr(SERVICE, PROVIDER + "\n")
            for cls in sorted(classes.rglob("*.class")):
                z.write(cls, cls.relative_to(classes).as_posix())
        os.replace(out, jar)
