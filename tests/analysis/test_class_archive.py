"""The driver's class archive: keyed to its install, mapped by every session, and
never put in place unless a JVM maps it (``courier.analysis.class_archive``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from courier.analysis import class_archive, session


def fake_install(root: Path) -> tuple[Path, Path]:
    java_home, spark_home = root / "jdk", root / "pyspark"
    (java_home / "lib" / "server").mkdir(parents=True)
    (java_home / "lib" / "server" / "libjvm.so").write_bytes(b"jvm")
    (spark_home / "jars").mkdir(parents=True)
    for name in ("spark-core.jar", "spark-sql.jar"):
        (spark_home / "jars" / name).write_bytes(b"classes")
    return java_home, spark_home


def test_key_changes_with_the_jvm_the_jars_and_the_options(tmp_path: Path) -> None:
    java_home, spark_home = fake_install(tmp_path)
    options = ("-XX:+UseParallelGC",)
    first = class_archive.key(options, java_home, spark_home)
    assert class_archive.key(options, java_home, spark_home) == first
    assert class_archive.key(("-XX:+UseG1GC",), java_home, spark_home) != first
    (spark_home / "jars" / "spark-sql.jar").write_bytes(b"other classes")
    second = class_archive.key(options, java_home, spark_home)
    assert second != first
    (spark_home / "jars" / "extra.jar").write_bytes(b"x")
    third = class_archive.key(options, java_home, spark_home)
    assert third != second
    (java_home / "lib" / "server" / "libjvm.so").write_bytes(b"another build")
    assert class_archive.key(options, java_home, spark_home) != third


def test_a_session_is_offered_only_an_archive_that_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(class_archive, "DIRECTORY", tmp_path)
    assert class_archive.driver_options(session.JVM_OPTIONS) == ()
    path = class_archive.path_for(session.JVM_OPTIONS)
    assert path is not None and path.parent == tmp_path
    path.write_bytes(b"archive")
    options = class_archive.driver_options(session.JVM_OPTIONS)
    assert options[0] == f"-XX:SharedArchiveFile={path}"
    assert set(options[1:]) == set(class_archive.QUIET)


def test_a_new_archive_replaces_those_of_earlier_installs(tmp_path: Path) -> None:
    kept = tmp_path / "spark-classes-new.jsa"
    for name in ("spark-classes-old.jsa", "spark-classes-new.jsa", "notes.txt"):
        (tmp_path / name).write_bytes(b"x")
    assert class_archive.remove_others(kept) == [tmp_path / "spark-classes-old.jsa"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "spark-classes-new.jsa"]


def test_a_build_needs_a_process_without_a_driver_jvm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The archive is written by the JVM the build starts; a process that already
    has one would silently analyse in it and write nothing."""
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "1")
    with pytest.raises(class_archive.ArchiveError, match="already has a Spark driver JVM"):
        class_archive.build(session.JVM_OPTIONS, tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def archive() -> Path:
    """The archive ``make`` builds; built here as make would when it is missing."""
    path = class_archive.path_for(session.JVM_OPTIONS)
    assert path is not None, "the suite needs Java"
    if not path.is_file():
        command = [sys.executable, "-m", "courier.analysis.class_archive"]
        built = subprocess.run(command, capture_output=True, text=True, timeout=900)
        if built.returncode != 0:
            pytest.fail(f"the class archive was not built:\n{built.stderr[-4000:]}")
    return path


FRESH_DRIVER = """
import json
from courier.analysis import class_archive, session
spark = session.create("local[1]", driver_memory="512m")
print(json.dumps([class_archive.driver_arguments(spark), class_archive.java_command(spark)]))
spark.stop()
"""


@pytest.mark.slow
def test_a_fresh_session_maps_the_built_archive_and_a_truncated_one_is_refused(
    archive: Path, tmp_path: Path
) -> None:
    started = subprocess.run(  # in tmp_path: a JVM that crashes leaves its log there
        [sys.executable, "-c", FRESH_DRIVER],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr[-4000:]
    arguments, command = json.loads(started.stdout.strip().splitlines()[-1])
    assert f"-XX:SharedArchiveFile={archive}" in arguments
    assert not any("SharedArchiveFile" in part for part in command)
    assert class_archive.maps(archive, command)
    truncated = tmp_path / "truncated.jsa"
    truncated.write_bytes(archive.read_bytes()[:10_000_000])
    assert not class_archive.maps(truncated, command)
