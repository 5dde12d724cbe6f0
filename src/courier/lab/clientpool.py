"""The runner's load-generator processes (multiprocessing, spawn), started and stopped by pid.

Protocol over each process's Pipe: the child sends ``"ready"`` once its clients are
logged in; the runner sends ``loadgen.Go`` when all are ready; the child answers
with its ``loadgen.ProcessResult`` (or an error text) when it has finished.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import multiprocessing.connection
import time
from multiprocessing.process import BaseProcess
from typing import Any

from courier.lab import loadgen, processes

READY_TIMEOUT = 120.0
STOP_GRACE = 10.0
POLL_INTERVAL = 0.05


class LoadProcesses:
    def __init__(self, plans: list[loadgen.ProcessPlan]) -> None:
        self.plans = plans
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
                target=loadgen.process_main, args=(plan, child), name=plan.process
            )
            process.start()
            child.close()
            self._processes.append(process)
            self._pipes.append(parent)

    async def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        for index in range(len(self._pipes)):
            message = await self._receive(index, timeout)
            if message != "ready":
                raise processes.ProcessFailed(f"{self.plans[index].process}: {message}")

    def go(self, go: loadgen.Go) -> None:
        for pipe in self._pipes:
            pipe.send(go)

    async def wait_done(self, timeout: float) -> list[loadgen.ProcessResult]:
        results = []
        for index in range(len(self._pipes)):
            message = await self._receive(index, timeout)
            if not isinstance(message, loadgen.ProcessResult):
                raise processes.ProcessFailed(f"{self.plans[index].process}: {message}")
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
                raise processes.ProcessFailed(
                    f"{self.plans[index].process} exited with {process.exitcode}"
                )
            if time.monotonic() > deadline:
                raise processes.ProcessFailed(f"{self.plans[index].process} did not answer")
            await asyncio.sleep(POLL_INTERVAL)
        try:
            return pipe.recv()
        except EOFError as exc:
            raise processes.ProcessFailed(f"{self.plans[index].process} hung up") from exc
