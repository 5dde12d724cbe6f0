"""Preparing a run through the middleware: queues, client identities, clock offsets.

Everything goes through the real client library, recorded like any other request
(behaviour ``setup``, process ``runner``), so the middleware's records of a run
all have a client record too. The setup client registers itself (the run's only
request made before a login), logs in, creates the queues in a fixed order
(the shared queue first) and registers every load client. Then one short-lived
client per middleware measures that middleware's clock offset.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from courier import errors, models, scram
from courier.client import AsyncClient, Recorder
from courier.lab import process_recording, workloads

SETUP_BEHAVIOUR = "setup"
CLOCK_SAMPLES = 9
REGISTER_BATCH = 64


@dataclass(frozen=True, slots=True)
class ClockOffset:
    offset_ns: int
    uncertainty_ns: int

    def as_json(self, *, applied_ns: int = 0) -> dict[str, int]:
        return {
            "offset_ns": self.offset_ns,
            "uncertainty_ns": self.uncertainty_ns,
            "applied_ns": applied_ns,
        }


class Setup:
    """A logged-in setup client on the first middleware (recorded unless ``recorded`` is None)."""

    def __init__(
        self,
        servers: Sequence[str],
        recorded: process_recording.ProcessRecording | None,
        identity: str,
        *,
        with_secrets: bool = False,
        ca: Path | None = None,
    ) -> None:
        """``with_secrets``: every client it registers (itself included) gets a secret
        of its own, kept in ``secrets``, for servers that require one; ``ca``: the
        servers speak TLS with a certificate from that CA."""
        self.servers = list(servers)
        self.identity = identity
        self._recorded = recorded
        self._with_secrets = with_secrets
        self.secrets: dict[str, str] = {}
        self.client = AsyncClient(self.servers[:1], recorder=self._new_recorder(), ca=ca)

    def _new_recorder(self) -> Recorder | None:
        if self._recorded is None:
            return None
        return self._recorded.client_recorder(SETUP_BEHAVIOUR)

    async def __aenter__(self) -> Setup:
        await self.client.open()
        secret = self._new_secret(self.identity)
        me = await self.client.register(self.identity, secret=secret)
        await self.client.login(client_id=me.id, secret=secret)
        return self

    def _new_secret(self, name: str) -> str | None:
        if not self._with_secrets:
            return None
        self.secrets[name] = scram.new_secret()
        return self.secrets[name]

    async def __aexit__(self, *exc_info: object) -> None:
        await self.client.close()

    async def queue(self, name: str) -> models.Queue:
        """Create the queue, or take the one of that name left by an earlier run."""
        try:
            return await self.client.create_queue(name)
        except errors.QueueExists:
            return await self.client.get_queue(name)

    async def queues(self, pool_count: int) -> workloads.QueueIds:
        pool = [(await self.queue(name)).id for name in workloads.pool_queue_names(pool_count)]
        pairs = await self.queue(workloads.PAIRS_QUEUE)
        jobs = await self.queue(workloads.JOBS_QUEUE)
        return workloads.QueueIds(tuple(pool), pairs.id, jobs.id)

    async def register(self, names: Sequence[str]) -> list[int]:
        """Register every name (pipelined, in batches); their ids in order."""
        ids: list[int] = []
        for start in range(0, len(names), REGISTER_BATCH):
            batch = names[start : start + REGISTER_BATCH]
            infos = await asyncio.gather(
                *(self.client.register(name, secret=self._new_secret(name)) for name in batch)
            )
            ids.extend(info.id for info in infos)
        return ids

    async def clock_offsets(self) -> dict[str, ClockOffset]:
        """Each middleware's clock minus ours, with the uncertainty of the estimate."""
        names = [f"{self.identity}-clock-{index}" for index in range(len(self.servers))]
        ids = await self.register(names)
        offsets: dict[str, ClockOffset] = {}
        for server, client_id in zip(self.servers, ids, strict=True):
            offsets[server] = await self._measure(server, client_id)
        return offsets

    async def _measure(self, server: str, client_id: int) -> ClockOffset:
        async with AsyncClient([server], recorder=self._new_recorder()) as clock_client:
            await clock_client.open(client_id=client_id)
            offset_ns, uncertainty_ns = await clock_client.clock_offset(CLOCK_SAMPLES)
        return ClockOffset(offset_ns, uncertainty_ns)


def offsets_as_json(offsets: dict[str, ClockOffset]) -> dict[str, Any]:
    """The manifest's ``clock_offsets``: measured values; nothing applied on one host."""
    return {server: offset.as_json() for server, offset in offsets.items()}
