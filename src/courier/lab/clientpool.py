"""The runner's load-generator processes (multiprocessing, spawn), started and stopped by pid.

Protocol over each process's Pipe: the child sends ``"ready"`` once its clients are
logged in; the runner sends ``loadgen.Go`` when all are ready; the child answers
with its result (or an error text) when it has finished. ``ProcessGroup`` is that
protocol for any entry point and result type (`courier bench` uses it too);
``LoadProcesses`` is the lab's load generators.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import multiprocessing.connection
import time
from collections.abc import Callable, Sequence
from multiprocessing.process import BaseProcess
from typing import Any, Generic, Protocol, TypeVar

from courier.lab import loadgen

READY_TIMEOUT = 120.0
STOP_GRACE = 10.0
POLL_INTERVAL = 0.05

ResultT = TypeVar("ResultT")


class NamedPlan(Protocol):
    """A picklable plan for one process; its name appears in errors."""

    @property
    def process(self) -> str: ...


class ProcessFailed(RuntimeError):
    """A load-generator process did not come up or did not end cleanly."""


Entry = Callable[[Any, multiprocessing.connection.Connection], None]
"""A process's entry point: ``entry(plan, control)``, control being its end of the Pipe."""


class ProcessGroup(Generic[ResultT]):
    def __init__(
        self, plans: Sequence[NamedPlan], entry: Entry, result_type: type[ResultT]
    ) -> None:
        self.plans = list(plans)
        self._entry = entry
        self._result_type = result_type
        self._context = multiprocessing.get_context("spawn")
        self._processes: list[BaseProcess] = []
        self._pipes: list[multiprocessing.connection.Connection] = []

    @property
    def pids(self) -> list[int]:
        return [process.pid for process in self._processes if process.pid is not None]

    def launch(self) -> None:
        for plan in self.plans:
            parent, child = self._context.Pipe()
            process = self._context.Process(
                target=self._entry, args=(plan, child), name=plan.process
            )
            process.start()
            child.close()
            self._processes.append(process)
            self._pipes.append(parent)

    async def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        for index in range(len(self._pipes)):
            message = await self._receive(index, timeout)
            if message != "ready":
                raise ProcessFailed(f"{self.plans[index].process}: {message}")

    def go(self, go: loadgen.Go) -> None:
        for pipe in self._pipes:
            pipe.send(go)

    async def wait_done(self, timeout: float) -> list[ResultT]:
        results = []
        for index in range(len(self._pipes)):
            message = await self._receive(index, timeout)
            if not isinstance(message, self._result_type):
                raise ProcessFailed(f"{self.plans[index].process}: {message}")
            results.append(message)
        for process in self._processes:
            process.join(STOP_GRACE)
        return results

    async def stop(self) -> None:
        """Terminate (SIGTERM, then SIGKILL) every process of ours still running."""
        for process in self._processes:
            if process.is_alive():
                process.terminate()
        deadline = time.monotonic() + STOP_GRACE
        for process in self._processes:
            remaining = max(0.0, deadline - time.monotonic())
            await asyncio.to_thread(process.join, remaining)
            if process.is_alive():
                process.kill()
            process.join(1.0)
        for pipe in self._pipes:
            pipe.close()

    async def _receive(self, index: int, timeout: float) -> Any:
        pipe, process = self._pipes[index], self._processes[index]
        deadline = time.monotonic() + timeout
        while not pipe.poll():
            if not process.is_alive() and not pipe.poll():
                raise ProcessFailed(f"{self.plans[index].process} exited with {process.exitcode}")
            if time.monotonic() > deadline:
                raise ProcessFailed(f"{self.plans[index].process} did not answer")
            await asyncio.sleep(POLL_INTERVAL)
        try:
            return pipe.recv()
        except EOFError as exc:
            raise ProcessFailed(f"{self.plans[index].process} hung up") from exc


class LoadProcesses(ProcessGroup[loadgen.ProcessResult]):
    """The lab's load generators: ``loadgen.process_main`` per plan."""

    def __init__(self, plans: Sequence[loadgen.ProcessPlan]) -> None:
        super().__init__(plans, loadgen.process_main, loadgen.ProcessResult)
