"""A load-generator plan for clients driven outside the runner (tests, benchmarks)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from courier.lab import loadgen, runner, setup, spec


async def load_plan(
    address: str, record_dir: Path, mix: dict[str, int], *, record: bool = True
) -> loadgen.ProcessPlan:
    """One process's plan for the ``mix`` of behaviours against one middleware, with
    its clients registered and its queues created as the runner would."""
    config = spec.build_config({"mix": mix, "client_processes": 1})
    prefix = f"load-{time.monotonic_ns()}"
    async with setup.Setup([address], None, f"{prefix}-setup") as prepared:
        queues = await prepared.queues(config.queues)
        slots = runner.client_slots(config, [address], prefix)
        ids = await prepared.register([slot.name for slot in slots])
    slots = [
        loadgen.ClientSlot(slot.name, slot.behaviour, slot.servers, client_id)
        for slot, client_id in zip(slots, ids, strict=True)
    ]
    (made,) = runner.process_plans(config, "load", record_dir, slots, queues)
    return dataclasses.replace(made, record=record)
