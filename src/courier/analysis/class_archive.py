"""A class-data-sharing archive of the classes Spark's driver loads for the pipeline.

A fresh JVM loads and verifies some 22,000 classes from Spark's jars before and
during its first analysis. An archive of them, written once after install, maps
them in already parsed and verified: a fresh session starts and analyses faster
(docs/measurements.md, "Pipeline speed"). ``make`` builds it with

    python -m courier.analysis.class_archive

by running the pipeline on a small generated experiment in a JVM that writes the
archive as it exits. The archive belongs to one JDK, one set of Spark jars and one
set of JVM options, so its name carries a key of all three and a change of any
simply leaves no archive to use. A file is only ever put in place whole and after
a JVM has mapped it (a truncated archive can crash the JVM that maps it).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.find_spark_home import _find_spark_home

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DIRECTORY = Path(sys.prefix) / "share" / "courier"
PATTERN = "spark-classes-*.jsa"
BUILD_REQUESTS = 20_000
"""Enough to run every step of the pipeline, so that every class it needs is loaded."""
EXIT_TIMEOUT_S = 600.0
QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")
"""The dump warns of every class it leaves out (signed jars, old class files), and a
JVM that cannot use an archive says so on stdout; either way it goes on without."""
_ARCHIVE_OPTIONS = ("-XX:ArchiveClassesAtExit=", "-XX:SharedArchiveFile=")
NO_JAVA = "no Java found: set JAVA_HOME or put java on PATH"


class ArchiveError(RuntimeError):
    """The archive could not be built, or the one built would not map."""


def java_home() -> Path | None:
    """The JDK spark-submit will start ($JAVA_HOME's, else the one on PATH), if its
    JVM library is where an archive's key can see it."""
    home = os.environ.get("JAVA_HOME")
    java = Path(home) / "bin" / "java" if home else shutil.which("java")
    if java is None or not Path(java).is_file():
        return None
    found = Path(java).resolve().parent.parent
    return found if _libjvm(found).is_file() else None


def _libjvm(home: Path) -> Path:
    return home / "lib" / "server" / "libjvm.so"


def key(jvm_options: Sequence[str], home: Path, spark_home: Path) -> str:
    """What an archive depends on: the JVM build, the jars in class-path order (the
    launcher expands ``jars/*`` in directory order) and the options."""
    digest = hashlib.sha256()
    jars = [spark_home / "jars" / name for name in os.listdir(spark_home / "jars")]
    for path in (_libjvm(home), *(jar for jar in jars if jar.suffix == ".jar")):
        stat = path.stat()
        digest.update(f"{path}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    digest.update("\n".join(jvm_options).encode())
    return digest.hexdigest()[:16]


def path_for(jvm_options: Sequence[str], directory: Path | None = None) -> Path | None:
    """Where the archive for these options and this install lives (None: no Java)."""
    home = java_home()
    if home is None:
        return None
    spark_home = Path(_find_spark_home())
    return (directory or DIRECTORY) / f"spark-classes-{key(jvm_options, home, spark_home)}.jsa"


def driver_options(jvm_options: Sequence[str]) -> tuple[str, ...]:
    """The options that map the archive, when one was built for this install."""
    path = path_for(jvm_options)
    if path is None or not path.is_file():
        return ()
    return (f"-XX:SharedArchiveFile={path}", *QUIET)


def maps(archive: Path, java_command: Sequence[str]) -> bool:
    """Whether a JVM started as ``java_command`` maps the archive (``-Xshare:on``
    makes it refuse to start otherwise). Run apart: a bad archive can crash it."""
    probe = [*java_command, "-Xshare:on", f"-XX:SharedArchiveFile={archive}"]
    probe += ["-XX:-CreateCoredumpOnCrash", "-version"]
    with tempfile.TemporaryDirectory(prefix="courier-class-probe-") as crash_logs:
        ran = subprocess.run(probe, capture_output=True, timeout=120, cwd=crash_logs)
    return ran.returncode == 0


def build(jvm_options: Sequence[str], directory: Path | None = None) -> Path:
    """Build and check the archive for these driver options; returns its path, and
    removes the archives of earlier installs.

    Must run in a process that has never had a Spark session: the archive is
    written by the JVM this call starts, as it exits.
    """
    target = path_for(jvm_options, directory)
    if target is None:
        raise ArchiveError(NO_JAVA)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".building-", dir=target.parent) as building:
        partial = Path(building) / target.name
        java_command = _run_pipeline_and_exit(partial)
        if not partial.is_file() or not maps(partial, java_command):
            raise ArchiveError(f"the JVM wrote no archive that it can map ({partial})")
        partial.replace(target)
    remove_others(target)
    return target


def remove_others(kept: Path) -> list[Path]:
    """Remove the archives of earlier installs beside ``kept`` (180 MB each)."""
    removed = [older for older in kept.parent.glob(PATTERN) if older != kept]
    for older in removed:
        older.unlink(missing_ok=True)
    return removed


def _driver_jvm(spark: SparkSession) -> Any:
    jvm = spark.sparkContext._jvm
    assert jvm is not None, "the session has no driver JVM"
    return jvm


def driver_arguments(spark: SparkSession) -> list[str]:
    """The options the running driver JVM was started with."""
    runtime = _driver_jvm(spark).java.lang.management.ManagementFactory.getRuntimeMXBean()
    return [str(argument) for argument in runtime.getInputArguments()]


def java_command(spark: SparkSession) -> list[str]:
    """The running driver JVM's java, options and class path, less any archive option."""
    system = _driver_jvm(spark).System
    java = Path(str(system.getProperty("java.home"))) / "bin" / "java"
    options = [o for o in driver_arguments(spark) if not o.startswith(_ARCHIVE_OPTIONS)]
    return [str(java), *options, "-cp", str(system.getProperty("java.class.path"))]


def _run_pipeline_and_exit(archive: Path) -> list[str]:
    """Analyse a small generated experiment in a fresh JVM that dumps its classes to
    ``archive`` at exit; returns that JVM's command line, to check the archive with.
    On any failure the JVM is killed, so that it writes nothing."""
    from pyspark import SparkContext

    from courier.analysis import pipeline, session, synthetic

    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        raise ArchiveError("this process already has a Spark driver JVM; build in a new one")
    with tempfile.TemporaryDirectory(prefix="courier-class-archive-") as scratch:
        experiment = synthetic.write_experiment(
            Path(scratch) / "experiment", requests_per_run=BUILD_REQUESTS // 2
        )
        dump = (f"-XX:ArchiveClassesAtExit={archive}", *QUIET)
        spark = session.create("local[2]", driver_options=dump, map_class_archive=False)
        process = getattr(spark.sparkContext._gateway, "proc", None)
        if process is None or process.stdin is None:
            raise ArchiveError("the Spark driver JVM was not started by this process")
        try:
            command = java_command(spark)
            pipeline.run(experiment, spark=spark, out=Path(scratch) / "report")
            spark.stop()
            process.stdin.close()  # the driver JVM exits, writing the archive, at EOF
            process.wait(timeout=EXIT_TIMEOUT_S)
        except BaseException:
            process.kill()
            process.wait()
            raise
    return command


def main(argv: Sequence[str] | None = None) -> int:
    from courier.analysis import session

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--directory", type=Path, default=None, help=f"default {DIRECTORY}")
    parser.add_argument("--force", action="store_true", help="build even if it exists")
    args = parser.parse_args(argv)
    existing = path_for(session.JVM_OPTIONS, args.directory)
    if existing is None:
        print(f"class archive: not built ({NO_JAVA})", file=sys.stderr)
        return 1
    if existing.is_file() and not args.force:
        print(f"class archive: {existing} (already built)")
        return 0
    began = time.perf_counter()
    try:
        built = build(session.JVM_OPTIONS, args.directory)
    except Exception as error:  # only a speed-up: say why, and let everything run without
        print(f"class archive: not built ({type(error).__name__}: {error})", file=sys.stderr)
        return 1
    size_mb = built.stat().st_size / 1e6
    print(f"class archive: {built} ({size_mb:.0f} MB, {time.perf_counter() - began:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
