"""``<run>/destinations.json``: the benchmark's queues, for the analysis.

The supply-chain benchmark (``courier.lab.supply``) writes one per run: every
queue id of the run (subscription queues included) with its name, the message
kind it carries, the interaction that kind belongs to, and whether the kind is
persistent (``persistent``) and was stored durably in that run
(``ran_persistent``). The analysis groups delivery times by interaction and judges
each queue's backlog with it. A run without the file is not a benchmark run.

    {"7": {"name": "dc-000.order", "kind": "order", "interaction": 1,
           "interaction_name": "orders", "persistent": true, "ran_persistent": true}}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MAP_FILE = "destinations.json"


def write(run_dir: Path, found: dict[int, dict[str, Any]]) -> Path:
    path = run_dir / MAP_FILE
    path.write_text(json.dumps({str(queue): row for queue, row in found.items()}, indent=1))
    return path


def read(run_dir: Path) -> dict[int, dict[str, Any]]:
    """The run's map; empty when the run has none."""
    path = run_dir / MAP_FILE
    if not path.exists():
        return {}
    return {int(queue): row for queue, row in json.loads(path.read_text()).items()}
