"""`courier analyze --master spark://...` on a real Spark standalone cluster.

A master and two workers (one core each) are started from the installed PySpark's
``spark-class``, on loopback only (SPARK_LOCAL_IP=127.0.0.1 and --host 127.0.0.1:
their web UIs bind where SPARK_LOCAL_IP says). The same small experiment is analysed
on the cluster and on local[2]; every result table must be equal, value for value.
Only the processes started here are stopped, by their own pids.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pyspark
import pytest

from courier.analysis import synthetic
from courier.server import launcher

pytestmark = pytest.mark.slow

SPARK_CLASS = Path(pyspark.__file__).parent / "bin" / "spark-class"
COURIER = Path(sys.executable).with_name("courier")
LOOPBACK = "127.0.0.1"
STARTUP_S = 90.0


def free_port() -> int:
    """Below the ephemeral range: a Spark daemon binds it seconds later."""
    return launcher.free_port(LOOPBACK)


def cluster_environment(conf_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COURIER_", "SPARK_"))}
    env |= {
        "SPARK_LOCAL_IP": LOOPBACK,  # every Spark socket, web UIs included, on loopback
        "SPARK_CONF_DIR": str(conf_dir),  # no site configuration leaks in
        "SPARK_HOME": str(SPARK_CLASS.parent.parent),
        "PYSPARK_PYTHON": sys.executable,
    }
    return env


class Cluster:
    """A standalone master and its workers, each a foreground ``spark-class`` process."""

    def __init__(self, root: Path) -> None:
        self.root = root
        conf = root / "conf"
        conf.mkdir(parents=True)
        self.env = cluster_environment(conf)
        self.master_url = self.ui_url = ""
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(self, workers: int) -> None:
        self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", LOOPBACK,
                    "--port", str(free_port()), "--webui-port", str(free_port()))  # fmt: skip
        # A port taken meanwhile makes Spark try the next one: read where it bound.
        self.master_url = self._logged("master", r"Starting Spark master at (spark://\S+)")
        self.ui_url = self._logged("master", r"MasterWebUI.* started at (http://\S+)")
        for n in range(workers):
            work = self.root / f"work-{n}"
            self._spawn(f"worker-{n}", "org.apache.spark.deploy.worker.Worker",
                        "--host", LOOPBACK, "--port", str(free_port()),
                        "--webui-port", str(free_port()), "--cores", "1", "--memory", "1g",
                        "--work-dir", str(work), self.master_url)  # fmt: skip
        self._wait_for_workers(workers)

    def _spawn(self, name: str, *arguments: str) -> None:
        log = (self.root / f"{name}.log").open("wb")
        self.processes.append(
            subprocess.Popen([str(SPARK_CLASS), *arguments], env=self.env, stdout=log,
                             stderr=subprocess.STDOUT, start_new_session=True)
        )  # fmt: skip

    def _logged(self, name: str, pattern: str) -> str:
        deadline = time.monotonic() + STARTUP_S
        log = self.root / f"{name}.log"
        while time.monotonic() < deadline:
            found = re.search(pattern, log.read_text(errors="replace"))
            if found:
                return found.group(1)
            time.sleep(0.2)
        raise AssertionError(f"{name} never logged {pattern!r}: {log.read_text()[-2000:]}")

    def state(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=5) as response:
            return dict(json.load(response))

    def _wait_for_workers(self, count: int) -> None:
        deadline = time.monotonic() + STARTUP_S
        while time.monotonic() < deadline:
            try:
                alive = [w for w in self.state()["workers"] if w["state"] == "ALIVE"]
                if len(alive) == count:
                    return
            except OSError:
                pass
            time.sleep(0.5)
        logs = {p.name: p.read_text(errors="replace")[-2000:] for p in self.root.glob("*.log")}
        raise AssertionError(f"the cluster did not come up: {logs}")

    def stop(self) -> None:
        for process in reversed(self.processes):  # only what this test started
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    started = Cluster(tmp_path_factory.mktemp("spark-cluster"))
    try:
        started.start(workers=2)
        yield started
    finally:
        started.stop()


def analyze(env: dict[str, str], *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(COURIER), "analyze", *arguments], env=env, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip


def test_the_cluster_binds_loopback_only(cluster: Cluster) -> None:
    listening = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True, check=False)
    ours = {str(p.pid) for p in cluster.processes}
    for line in listening.stdout.splitlines():
        if any(f"pid={pid}," in line for pid in ours):
            local = line.split()[3]
            assert local.startswith((f"{LOOPBACK}:", "[::ffff:127.0.0.1]:")), line


def test_results_on_the_cluster_equal_local_modes(cluster: Cluster, tmp_path: Path) -> None:
    experiment = synthetic.write_experiment(
        tmp_path / "exp", factors={"clients": [1, 8], "instances": [1, 2]}, replications=2,
        requests_per_run=3_000, arrival="open",
    )  # fmt: skip
    on_cluster = analyze(cluster.env, str(experiment), "--master", cluster.master_url,
                         "--out", str(tmp_path / "cluster"))  # fmt: skip
    assert on_cluster.returncode == 0, on_cluster.stderr
    local = analyze(cluster.env, str(experiment), "--master", "local[2]",
                    "--out", str(tmp_path / "local"))  # fmt: skip
    assert local.returncode == 0, local.stderr
    names = sorted(p.name for p in (tmp_path / "local" / "tables").glob("*.parquet"))
    assert "delivery_runs.parquet" in names and "factorial_0_effects.parquet" in names
    assert names == sorted(p.name for p in (tmp_path / "cluster" / "tables").glob("*.parquet"))
    for name in names:
        expected = pq.read_table(tmp_path / "local" / "tables" / name)
        found = pq.read_table(tmp_path / "cluster" / "tables" / name)
        assert found.equals(expected), name
    # The work ran on the cluster's executors, not on the driver alone.
    apps = [a for a in cluster.state()["completedapps"] if a["name"] == "courier-analysis"]
    assert apps and all(app["cores"] >= 1 for app in apps)


def test_a_directory_the_workers_cannot_see_is_a_clear_error(
    cluster: Cluster, tmp_path: Path
) -> None:
    # One host cannot hide a path from its own workers; a path that exists nowhere
    # takes the same road through the executors' probe.
    script = (
        "import sys; from pathlib import Path\n"
        "from courier.analysis import cluster, errors, session\n"
        f"spark = session.create({cluster.master_url!r})\n"
        "try:\n"
        f"    cluster.check_visible(spark, Path({str(tmp_path / 'nowhere')!r}))\n"
        "except errors.ExperimentError as exc:\n"
        "    print(exc)\n"
        "finally:\n"
        "    spark.stop()\n"
    )
    result = subprocess.run([sys.executable, "-c", script], env=cluster.env, capture_output=True,
                            text=True, timeout=180, check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "nowhere/manifest.json is not visible to the Spark workers on" in result.stdout
    assert "same path" in result.stdout
