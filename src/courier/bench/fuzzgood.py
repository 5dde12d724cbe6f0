"""The well-behaved client of `courier bench fuzz`: it must notice nothing.

It sends numbered messages addressed to itself into a queue of its own and
receives each one back, through one server, timing every call. No fuzzer can take
those messages (they are for it alone); a fuzzed SEND that lands in its queue is
counted as *foreign*, not as a loss. At the end it takes what is left and counts
what never came back.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import TypeVar

from courier import errors, models
from courier.client import AsyncClient

T = TypeVar("T")


@dataclass(slots=True)
class GoodReport:
    server: str
    sends: int = 0
    receives: int = 0
    errors: int = 0
    last_error: str = ""
    lost: int = 0
    duplicates: int = 0
    foreign: int = 0  # messages in its queue it did not send (a fuzzed SEND)
    late: int = 0  # receives that timed out (the message came later, or never)
    latencies_ns: list[int] = field(default_factory=list)

    @property
    def operations(self) -> int:
        return self.sends + self.receives


class GoodClient:
    """Sends numbered messages to itself through one server and receives each back."""

    RECEIVE_TIMEOUT_S = 10.0

    def __init__(self, address: str, name: str) -> None:
        self.report = GoodReport(address)
        self._name = name
        self._client = AsyncClient(address, request_timeout=60.0, failover_timeout=5.0)
        self._client_id = 0
        self._queue_id = 0
        self._number = 0
        self._outstanding: set[int] = set()
        self._received: set[int] = set()

    @property
    def ids(self) -> tuple[int, int]:
        """(client id, queue id), which the fuzzers must never name."""
        return self._client_id, self._queue_id

    async def open(self) -> None:
        await self._client.open()
        await self._client.register(self._name)
        self._client_id = (await self._client.login(name=self._name)).id
        self._queue_id = (await self._client.create_queue(self._name)).id

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self._cycle()

    async def _cycle(self) -> None:
        self._number += 1
        body = f"{self._name} {self._number}"
        try:
            await self._timed(self._client.send(self._queue_id, body, receiver=self._client_id))
            self.report.sends += 1
            self._outstanding.add(self._number)
            message = await self._timed(
                self._client.receive(self._queue_id, timeout=self.RECEIVE_TIMEOUT_S)
            )
            self.report.receives += 1
        except errors.CourierError as exc:
            self.report.errors += 1
            self.report.last_error = f"{type(exc).__name__}: {exc}"
            await asyncio.sleep(0.1)
            return
        if message is None:
            self.report.late += 1
        else:
            self._account(message)

    async def _timed(self, call: Awaitable[T]) -> T:
        started = time.perf_counter_ns()
        result = await call
        self.report.latencies_ns.append(time.perf_counter_ns() - started)
        return result

    def _account(self, message: models.Message) -> None:
        name, _, number = message.body.decode(errors="replace").rpartition(" ")
        if name != self._name or not number.isdigit():
            self.report.foreign += 1
        elif int(number) in self._received:
            self.report.duplicates += 1
        else:
            self._received.add(int(number))
            self._outstanding.discard(int(number))

    async def finish(self) -> GoodReport:
        """Take what is left in the queue, count what never came back, close."""
        try:
            while (message := await self._client.pop(self._queue_id)) is not None:
                self._account(message)
        except errors.CourierError as exc:
            self.report.errors += 1
            self.report.last_error = f"{type(exc).__name__} at the end: {exc}"
        self.report.lost = len(self._outstanding)
        with contextlib.suppress(errors.CourierError):
            await self._client.close()
        return self.report
