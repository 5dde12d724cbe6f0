"""Checking what a `courier` subprocess printed."""

from __future__ import annotations

import json
import subprocess
from typing import Any


def ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, (result.stdout, result.stderr)
    return result


def as_json(result: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(ok(result).stdout)
