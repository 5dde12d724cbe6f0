"""The CLI's secrets: ``<data dir>/credentials.json``, readable by this user only.

`courier register NAME` and `courier up` (its admin client) put a client's secret
here, and `--as NAME` takes it from here, so only a user who can read this file logs
in as NAME. The directory is created mode 0700 and the file is written mode 0600,
whole (a reader never sees half of it). ``--secret`` / ``COURIER_SECRET`` beats it.

    {"clients": {"alice": "3q2-...", "admin": "..."}}
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from courier import files

CREDENTIALS_FILE = "credentials.json"


def path(home: Path) -> Path:
    return home / CREDENTIALS_FILE


def load(home: Path) -> dict[str, str]:
    """Every client name -> secret kept here (empty when there is no file)."""
    try:
        found = json.loads(path(home).read_text())
        return {str(name): str(secret) for name, secret in found["clients"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def secret_for(home: Path, name: str) -> str | None:
    return load(home).get(name)


def save(home: Path, name: str, secret: str) -> Path:
    """Keep ``secret`` as NAME's (replacing one kept before); the file's path."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    kept = load(home)
    kept[name] = secret
    target = path(home)
    files.write_private(target, json.dumps({"clients": kept}, indent=2))
    os.chmod(target, 0o600)  # mkstemp made it so; said once more for clarity
    return target
