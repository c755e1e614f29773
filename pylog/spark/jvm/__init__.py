"""The JVM reader of ``format("pylog")``: its Java sources (``java/``) and their build.

The jar's name holds the Spark version it was compiled against and a hash of the sources
(docs/spark.md, "The JVM reader"). It is compiled at install time into the package
(``jars/``) when a JDK and Spark's jars are found then (``setup.py`` calls
:func:`build_packaged`), else on first use into a cache. Without a JDK (``javac``) or pyspark
there is no jar: one notice on stderr, and the Python source serves every query.

This module imports only the standard library: ``setup.py`` loads it by path, before any of
pylog's dependencies are installed.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

SOURCES = Path(__file__).parent / "java"
#: where an install puts the jar it compiled, inside the package
PACKAGED = Path(__file__).parent / "jars"
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


def spark_at_install() -> tuple[str, Path] | None:
    """(version, jars dir) of the Spark to compile against at install time, or None: the
    directory ``$PYLOG_SPARK_JARS``, else pyspark's ``jars/`` where this interpreter finds it
    (a build without isolation), else in the site-packages of the environment being installed
    into (pip's isolated build runs that environment's interpreter with them hidden). The
    version is pyspark's (its ``version.py``), else read from the name of
    ``spark-core_<scala>-<version>.jar``. Does not import pyspark."""
    import importlib.util
    import site
    import sysconfig
    dirs = [Path(os.environ["PYLOG_SPARK_JARS"])] if os.environ.get("PYLOG_SPARK_JARS") else []
    spec = importlib.util.find_spec("pyspark")
    if spec is not None and spec.origin:
        dirs.append(Path(spec.origin).parent / "jars")
    sites = [sysconfig.get_path("purelib"), sysconfig.get_path("platlib"), *site.getsitepackages()]
    dirs += [Path(d) / "pyspark" / "jars" for d in sites]
    for jars in dirs:
        version_py = jars.parent / "version.py"
        found = re.search(r"__version__\b[^=]*=\s*[\"']([^\"']+)", version_py.read_text()) \
            if version_py.is_file() else None
        if found:
            return found.group(1), jars
        for core in sorted(jars.glob("spark-core_*-*.jar")):
            return core.name[:-len(".jar")].split("-", 2)[2], jars
    return None


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
    """The path of pylog's Spark jar (for ``spark.jars``): the one the install put in the
    package if it matches these sources and the installed Spark, else the cached one, built
    now if needed and ``build``; None without pyspark, or with no such jar and no JDK (then a
    one-line notice on stderr, once per process). Cost: a hash of the sources; without a
    packaged jar, the first call per source/Spark version compiles (~10 s)."""
    spark = _spark()
    if spark is None:
        return _notice("pyspark is not installed")
    name = jar_name(spark[0])
    if (PACKAGED / name).is_file():  # its name holds the sources' hash and the Spark version
        return str(PACKAGED / name)
    jar = cache_dir() / name
    if jar.is_file():
        return str(jar)
    if not build:
        return None
    javac = _javac()
    if javac is None:
        return _notice("no JDK (javac) found")
    build_jar(javac, spark[1], jar)
    return str(jar)


#: which sessions the JVM reader serves, and what the Python source serves besides
JVM_USE = ("batch reads and streams of sessions made by pylog.spark.session() or given "
           "spark.jars=pylog.spark.jar_path(); option reader=python turns it off per read")
PYTHON_USE = ("writes, streams with startingOffsets=group, groupId, commitOffsetsToGroup or remote_storage, and "
              "reads and streams of any other session (a plain SparkSession: 3-12x slower; its first read warns)")


def reader_state() -> str:
    """The JVM reader's state in a few words: the jar it would use, that one will be built
    on first use, or why the Python source serves. Builds nothing; cost: an import of
    pyspark and a hash of the sources."""
    if _spark() is None:
        return "off (pyspark is not installed)"
    jar = jar_path(build=False)
    if jar is not None:
        return f"on ({jar})"
    return "built on first use (JDK found)" if _javac() else "off (no JDK: the Python source serves)"


def reader_lines() -> list[str]:
    """``pylog --version``'s lines on Spark: the JVM reader's state and the queries it
    serves, then those the Python source serves. Cost: :func:`reader_state`."""
    state = reader_state()
    if state.startswith("off"):
        return [f"Spark JVM reader: {state}", "Spark Python source: every query"]
    return [f"Spark JVM reader: {state}: {JVM_USE}", f"Spark Python source: {PYTHON_USE}"]


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


def build_packaged(package_dir: Path) -> Path | None:
    """At install time: compile the jar into ``package_dir/jars`` (the package's copy of
    :data:`PACKAGED`) when a JDK and Spark's jars are found (:func:`spark_at_install`), else
    print why not in one line and return None; the jar is then built on first use. A failed
    compile is reported the same way and does not fail the install."""
    spark, javac = spark_at_install(), _javac()
    why = ("no JDK (javac) found" if javac is None else
           "no Spark jars found (pyspark in the build or target environment, or $PYLOG_SPARK_JARS)"
           if spark is None else None)
    if why is None:
        jar = package_dir / "jars" / jar_name(spark[0])
        try:
            build_jar(javac, spark[1], jar)
            for old in jar.parent.glob("pylog-spark-*.jar"):  # an editable checkout's earlier builds
                if old != jar:
                    old.unlink()
            return jar
        except (OSError, RuntimeError) as e:
            why = f"compiling it failed ({str(e).strip().splitlines()[-1] if str(e).strip() else e})"
    print(f"pylog: {why}, so no Spark jar in the package; it is built on first use (docs/spark.md)",
          file=sys.stderr)
    return None
