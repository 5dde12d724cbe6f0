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
from typing import TYPE_CHECKING

import pyspark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DIRECTORY = Path(sys.prefix) / "share" / "courier"
BUILD_REQUESTS = 20_000
"""Enough to run every step of the pipeline, so that every class it needs is loaded."""
EXIT_TIMEOUT_S = 600.0
QUIET_DUMP = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")
"""The dump warns of every class it leaves out (signed jars, old class files)."""
_ARCHIVE_OPTIONS = ("-XX:ArchiveClassesAtExit=", "-XX:SharedArchiveFile=")


class ArchiveError(RuntimeError):
    """The archive could not be built, or the one built would not map."""


def java_home() -> Path | None:
    """The JDK spark-submit will start: $JAVA_HOME's, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    java = Path(home) / "bin" / "java" if home else shutil.which("java")
    if java is None or not Path(java).is_file():
        return None
    return Path(java).resolve().parent.parent


def key(jvm_options: Sequence[str], home: Path, spark_home: Path) -> str:
    """What an archive depends on: the JVM build, the jars (the class path) and options."""
    digest = hashlib.sha256()
    for path in (
        home / "lib" / "server" / "libjvm.so",
        *sorted((spark_home / "jars").glob("*.jar")),
    ):
        stat = path.stat() if path.is_file() else None
        digest.update(f"{path}:{stat and stat.st_size}:{stat and stat.st_mtime_ns}\n".encode())
    digest.update("\n".join(jvm_options).encode())
    return digest.hexdigest()[:16]


def path_for(jvm_options: Sequence[str], directory: Path | None = None) -> Path | None:
    """Where the archive for these options and this install lives (None: no Java)."""
    home = java_home()
    if home is None:
        return None
    spark_home = Path(pyspark.__file__).parent
    return (directory or DIRECTORY) / f"spark-classes-{key(jvm_options, home, spark_home)}.jsa"


def driver_options(jvm_options: Sequence[str]) -> tuple[str, ...]:
    """The option that maps the archive, when one was built for this install."""
    path = path_for(jvm_options)
    return (f"-XX:SharedArchiveFile={path}",) if path is not None and path.is_file() else ()


def maps(archive: Path, java_command: Sequence[str]) -> bool:
    """Whether a JVM started as ``java_command`` maps the archive (``-Xshare:on``
    makes it refuse to start otherwise). Run apart: a bad archive can crash it."""
    probe = [*java_command, "-Xshare:on", f"-XX:SharedArchiveFile={archive}"]
    probe += ["-XX:-CreateCoredumpOnCrash", "-version"]
    with tempfile.TemporaryDirectory(prefix="courier-class-probe-") as crash_logs:
        ran = subprocess.run(probe, capture_output=True, timeout=120, cwd=crash_logs)
    return ran.returncode == 0


def build(jvm_options: Sequence[str], directory: Path | None = None) -> Path:
    """Build and check the archive for these driver options; returns its path.

    Must run in a process with no Spark session yet: the archive is written by the
    JVM this call starts, as it exits.
    """
    target = path_for(jvm_options, directory)
    if target is None:
        raise ArchiveError("no Java found: set JAVA_HOME or put java on PATH")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.partial")
    try:
        java_command = _run_pipeline_and_exit(partial)
        if not partial.is_file() or not maps(partial, java_command):
            raise ArchiveError(f"the JVM wrote no archive that it can map ({partial})")
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def driver_arguments(spark: SparkSession) -> list[str]:
    """The options the running driver JVM was started with."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    runtime = jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    return [str(argument) for argument in runtime.getInputArguments()]


def java_command(spark: SparkSession) -> list[str]:
    """The running driver JVM's java, options and class path, less any archive option."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    java = Path(str(jvm.System.getProperty("java.home"))) / "bin" / "java"
    options = [o for o in driver_arguments(spark) if not o.startswith(_ARCHIVE_OPTIONS)]
    return [str(java), *options, "-cp", str(jvm.System.getProperty("java.class.path"))]


def _run_pipeline_and_exit(archive: Path) -> list[str]:
    """Analyse a small generated experiment in a fresh JVM that dumps its classes to
    ``archive`` at exit; returns that JVM's command line, to check the archive with."""
    from courier.analysis import pipeline, session, synthetic

    with tempfile.TemporaryDirectory(prefix="courier-class-archive-") as scratch:
        experiment = synthetic.write_experiment(
            Path(scratch) / "experiment", requests_per_run=BUILD_REQUESTS // 2
        )
        dump = (f"-XX:ArchiveClassesAtExit={archive}", *QUIET_DUMP)
        spark = session.create("local[2]", extra_driver_options=dump)
        command = java_command(spark)
        gateway = spark.sparkContext._gateway
        pipeline.run(experiment, spark=spark, out=Path(scratch) / "report")
        spark.stop()
        # The driver JVM exits (and writes the archive) when its stdin closes.
        process = getattr(gateway, "proc", None)
        if process is None or process.stdin is None:
            raise ArchiveError("the Spark driver JVM was not started by this process")
        process.stdin.close()
        process.wait(timeout=EXIT_TIMEOUT_S)
    return command


def main(argv: Sequence[str] | None = None) -> int:
    from courier.analysis import session

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--directory", type=Path, default=None, help=f"default {DIRECTORY}")
    parser.add_argument("--force", action="store_true", help="build even if it exists")
    args = parser.parse_args(argv)
    existing = path_for(session.JVM_OPTIONS, args.directory)
    if existing is None:
        print("class archive: no Java found, nothing built", file=sys.stderr)
        return 1
    if existing.is_file() and not args.force:
        print(f"class archive: {existing} (already built)")
        return 0
    began = time.perf_counter()
    try:
        built = build(session.JVM_OPTIONS, args.directory)
    except (ArchiveError, subprocess.SubprocessError) as error:
        print(f"class archive: {error}", file=sys.stderr)
        return 1
    size_mb = built.stat().st_size / 1e6
    print(f"class archive: {built} ({size_mb:.0f} MB, {time.perf_counter() - began:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
