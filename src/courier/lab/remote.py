"""`courier lab clients`: one load-generator process run by hand, on any host.

It registers its own clients and resolves (or creates) the shared queues through
the middleware, then runs like a process the runner starts, from now for
``duration_s`` seconds. Records go to ``<record_dir>/<kind>/<process>-<n>.parquet``;
collect them into the run directory of the experiment afterwards.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from courier.lab import loadgen, process_recording, runner, setup
from courier.measurements import record_schema


@dataclass(frozen=True, slots=True)
class ClientsOptions:
    servers: tuple[str, ...]
    record_dir: Path
    run_id: str
    process: str
    behaviour: str = "standard"
    count: int = 8
    duration_s: float = 60.0
    message_size: int = 200
    queues: int = 10
    think_time_s: float = 0.0
    rate: float = 0.0
    clock_offset_ns: int = 0


def default_process_name() -> str:
    return f"clients-{socket.gethostname()}-{os.getpid()}"


async def run_clients(options: ClientsOptions) -> loadgen.ProcessResult:
    addresses = [runner.config_address(server) for server in options.servers]
    names = [f"{options.process}-{index:04d}" for index in range(options.count)]
    setup_recording = process_recording.ProcessRecording(
        options.record_dir, options.run_id, f"{options.process}-setup", "client",
        (record_schema.CLIENT_REQUESTS,),
    ).start()  # fmt: skip
    try:
        identity = f"{options.process}-setup"
        async with setup.Setup(options.servers, setup_recording, identity) as prepared:
            queues = await prepared.queues(options.queues)
            ids = await prepared.register(names)
    finally:
        setup_recording.close()
    slots = []
    for index, (name, client_id) in enumerate(zip(names, ids, strict=True)):
        first = index % len(addresses)
        ordered = tuple(addresses[first:] + addresses[:first])
        slots.append(loadgen.ClientSlot(name, options.behaviour, ordered, client_id))
    plan = loadgen.ProcessPlan(
        process=options.process, run_dir=options.record_dir, run_id=options.run_id,
        slots=tuple(slots), queues=queues, message_size=options.message_size,
        think_time_s=options.think_time_s, rate=options.rate,
        peers={options.behaviour: tuple(ids)}, clock_offset_ns=options.clock_offset_ns,
    )  # fmt: skip

    async def start_now() -> loadgen.Go:
        return loadgen.Go(time.time_ns(), options.duration_s)

    return await loadgen.run_process(plan, start_now)
