"""`courier bench chaos`: at-least-once delivery while middleware die and PostgreSQL restarts.

A fresh durable embedded PostgreSQL and ``middlewares`` `courier serve` processes
(``chaos_cluster``). ``producers`` clients send numbered messages with dedup ids to
one queue and ``consumers`` clients receive them with a lease and ack them
(``chaos_clients``), every one its own registered client that knows all the
middleware. Every ``kill_interval_s`` a random middleware gets SIGKILL and is
started again on its port; once, when half the messages are confirmed,
PostgreSQL gets a fast shutdown and is started again instead.

When every producer is done, the chaos stops and the consumers drain the queue;
then the reports are added up (``chaos_ledger``): every confirmed message acked
exactly once, none lost, each redelivery with its reason, and each client's
failover time after each kill. The database must hold nothing of the queue.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import secrets
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from courier.bench import (
    chaos_clients,
    chaos_cluster,
    chaos_ledger,
    chaos_queue,
    database,
    defaults,
    launch,
    progress,
    results,
)
from courier.lab import clientpool, setup

NAME = "chaos"
FAILOVER_NEEDED_S = 1.0
"""Every failover must be shorter than this."""
SAMPLE_S = 2.0
"""How often the queue's depth is sampled while the producers run."""
DRAIN_POLL_S = 0.5
DRAIN_STALL_S = 30.0
"""When the queue's depth has not changed for this long (plus the lease) after the
producers are done, the consumers stop anyway and what is left is reported."""
GIVE_UP_S = 60.0
"""A send (or ack) retried for this long without an answer is given up."""
SECONDS_PER_MESSAGE = 0.01
"""With a margin of 600 s, how long the whole run may take before it is stopped."""


@dataclass(frozen=True, slots=True)
class Settings:
    messages: int = defaults.CHAOS_MESSAGES
    producers: int = defaults.CHAOS_PRODUCERS
    consumers: int = defaults.CHAOS_CONSUMERS
    middlewares: int = defaults.CHAOS_MIDDLEWARES
    kill_interval_s: float = defaults.CHAOS_KILL_INTERVAL_S
    lease_s: float = defaults.CHAOS_LEASE_S
    process_s: float = defaults.CHAOS_PROCESS_S
    window: int = defaults.CHAOS_WINDOW
    processes: int = defaults.PROCESSES
    pool_size: int = defaults.SERVE.pool.max_size
    message_size: int = defaults.MESSAGE_SIZE
    restart_database: bool = True
    log_dir: Path | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "messages": self.messages, "producers": self.producers,
            "consumers": self.consumers, "middlewares": self.middlewares,
            "kill_interval_s": self.kill_interval_s, "lease_s": self.lease_s,
            "process_s": self.process_s, "window": self.window, "processes": self.processes,
            "pool_size": self.pool_size, "message_size": self.message_size,
            "restart_database": self.restart_database,
            "database": "fresh embedded PostgreSQL, durable",
        }  # fmt: skip


@dataclass(frozen=True, slots=True)
class ChaosResult:
    accounts: chaos_ledger.Accounts
    kills: list[chaos_cluster.Kill]
    restarts: list[chaos_cluster.DatabaseRestart]
    outages: chaos_ledger.Outages
    leftovers: dict[str, int]  # rows of the queue still stored at the end
    most_waiting: int  # the most messages of the queue stored at once (sampled)
    producing_s: float
    total_s: float  # from the go until the queue was drained
    servers: dict[str, str]
    started: float = 0.0  # the go, on time.monotonic()

    @property
    def failover(self) -> dict[str, float] | None:
        return chaos_ledger.spread(self.outages.failovers)

    @property
    def passed(self) -> bool:
        return (
            self.accounts.lost == 0
            and self.accounts.duplicate_acks == 0
            and not any(self.leftovers.values())
        )

    def verdict(self) -> list[str]:
        found = self.accounts
        lines = [
            f"lost: {found.lost} (must be 0): {_met(found.lost == 0)}",
            f"duplicate acks: {found.duplicate_acks} (must be 0): {_met(not found.duplicate_acks)}",
            f"left in the database: {self.leftovers['messages']} messages,"
            f" {self.leftovers['held']} held (must be 0): {_met(not any(self.leftovers.values()))}",
        ]
        spread = self.failover
        if spread is None:
            lines.append("failover: no client was using a killed middleware")
        else:
            fast = spread["max_s"] < FAILOVER_NEEDED_S
            lines.append(f"failover (logged in on a survivor) max {spread['max_s']:.3f} s"
                         f" (needs < {FAILOVER_NEEDED_S:g} s): {_met(fast)}")  # fmt: skip
            lines += self._slow_failovers()
        unexplained = found.unexplained
        lines.append(
            f"redeliveries without a known reason: {unexplained}"
            if unexplained else "every redelivery came with its reason"
        )  # fmt: skip
        return lines

    def _slow_failovers(self) -> list[str]:
        """A line per kill after which a failover took FAILOVER_NEEDED_S or more."""
        lines = []
        for kill, failovers in zip(self.kills, self.outages.by_kill, strict=True):
            slow = [f.login_s for f in failovers if f.login_s >= FAILOVER_NEEDED_S]
            if not slow:
                continue
            after = [kill.at - (r.at + r.back_s) for r in self.restarts if r.at < kill.at]
            since = f", {after[-1]:.1f} s after PostgreSQL was back" if after else ""
            lines.append(
                f"  the kill at {kill.at - self.started:.1f} s{since}: {len(slow)} of"
                f" {len(failovers)} failovers took {min(slow):.2f}-{max(slow):.2f} s"
            )
        return lines

    def as_json(self, settings: Settings) -> dict[str, Any]:
        return {
            "benchmark": NAME,
            "spec": settings.as_json(),
            "environment": results.environment(self.servers),
            "accounts": self.accounts.as_json(),
            "leftovers": self.leftovers,
            "most_waiting": self.most_waiting,
            "kills": [_kill_json(kill, each, self.started) for kill, each
                      in zip(self.kills, self.outages.by_kill, strict=True)],
            "database_restarts": [_restart_json(r, self.started) for r in self.restarts],
            "failover": self.failover,
            "failover_answered": chaos_ledger.spread(self.outages.answered),
            "database_recovery": chaos_ledger.spread(self.outages.database),
            "other_outages": len(self.outages.other),
            "producing_s": round(self.producing_s, 3),
            "total_s": round(self.total_s, 3),
            "confirmed_per_s": _rate(self.accounts.sends_confirmed, self.producing_s),
            "acked_per_s": _rate(self.accounts.acked, self.total_s),
            "verdict": {"passed": self.passed, "text": self.verdict()},
        }  # fmt: skip


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def _rate(count: int, seconds: float) -> float:
    return round(count / seconds, 1) if seconds > 0 else 0.0


def _kill_json(
    kill: chaos_cluster.Kill, failovers: list[chaos_ledger.Failover], started: float
) -> dict[str, Any]:
    return {
        "at_s": round(kill.at - started, 3), "server": kill.server, "pid": kill.pid,
        "restarted_s": round(kill.restarted_s, 3),
        "failovers": [{"client": f.client, "to": f.to, "login_s": round(f.login_s, 4),
                       "answered_s": round(f.answered_s, 4)}
                      for f in failovers],
    }  # fmt: skip


def _restart_json(restart: chaos_cluster.DatabaseRestart, started: float) -> dict[str, float]:
    return {"at_s": round(restart.at - started, 3), "stopped_s": round(restart.stopped_s, 3),
            "back_s": round(restart.back_s, 3)}  # fmt: skip


async def run(settings: Settings, phases: progress.Phases) -> ChaosResult:
    """Start it all, run the clients through the chaos, add up, stop it all."""
    prefix = f"bench-{secrets.token_hex(3)}"
    phases.phase(f"starting PostgreSQL and {settings.middlewares} middleware", None, "")
    with tempfile.TemporaryDirectory(prefix="courier-bench-") as work_dir:
        log_dir = settings.log_dir or Path(work_dir) / "logs"
        connections = settings.middlewares * settings.pool_size
        async with database.fresh_server(connections=connections) as server:
            version = await database.server_version(server.dsn)
            cluster = chaos_cluster.Cluster(server, log_dir, settings.middlewares,
                                            settings.pool_size)  # fmt: skip
            async with cluster:
                queue_id, producers, consumers = await _prepare(cluster.servers, prefix, settings)
                director = Director(cluster, settings, queue_id, phases)
                reports = await director.drive(producers, consumers)
                leftovers = await chaos_queue.counts(server.dsn, queue_id)
                left = await chaos_queue.left(server.dsn, queue_id)
    ledgers = [report.ledger for report in reports]
    return ChaosResult(
        accounts=chaos_ledger.account(settings.messages, settings.producers, ledgers, left),
        kills=director.kills, restarts=director.restarts,
        outages=chaos_ledger.sort_outages(
            [o for report in reports for o in report.outages], director.kills, director.restarts
        ),
        leftovers=leftovers, most_waiting=director.depth.most,
        producing_s=max(report.producing_s for report in reports),
        total_s=director.total_s, servers={"postgresql": version}, started=director.started,
    )  # fmt: skip


async def _prepare(
    servers: Sequence[str], prefix: str, settings: Settings
) -> tuple[int, list[str], list[str]]:
    producers = [f"{prefix}-producer-{n}" for n in range(settings.producers)]
    consumers = [f"{prefix}-consumer-{n}" for n in range(settings.consumers)]
    async with setup.Setup(servers, None, f"{prefix}-setup") as prepared:
        queue = await prepared.queue(f"{prefix}-{NAME}")
        await prepared.register(producers + consumers)
    return queue.id, producers, consumers


@dataclass(slots=True)
class Director:
    """Runs the client processes and, meanwhile, the chaos; then waits for the drain."""

    cluster: chaos_cluster.Cluster
    settings: Settings
    queue_id: int
    phases: progress.Phases
    kills: list[chaos_cluster.Kill] = field(default_factory=list)
    restarts: list[chaos_cluster.DatabaseRestart] = field(default_factory=list)
    total_s: float = 0.0
    _context: Any = field(default_factory=lambda: multiprocessing.get_context("spawn"))
    _progress: Any = None
    _stop: Any = None
    _chaos: asyncio.Task[None] | None = None
    _producing: asyncio.Event = field(default_factory=asyncio.Event)
    started: float = 0.0  # the go, on time.monotonic()
    depth: chaos_queue.Depth = field(init=False)
    _drain_from: float | None = None
    _next_sample: float = 0.0

    def __post_init__(self) -> None:
        self.depth = chaos_queue.Depth(self.cluster.database.dsn, self.queue_id)

    async def drive(
        self, producers: list[str], consumers: list[str]
    ) -> list[chaos_clients.ProcessReport]:
        count = min(self.settings.processes, max(len(producers), len(consumers)))
        self._progress = self._context.RawArray("q", count * chaos_clients.PROGRESS_FIELDS)
        self._stop = self._context.Event()
        plans = chaos_clients.plans_for(
            count, producers, consumers, servers=self.cluster.servers, queue_id=self.queue_id,
            messages=self.settings.messages, producer_count=self.settings.producers,
            window=self.settings.window, lease_s=self.settings.lease_s,
            process_s=self.settings.process_s,
            message_size=self.settings.message_size, give_up_s=GIVE_UP_S, stop=self._stop,
            progress=self._progress,
        )  # fmt: skip
        group = clientpool.ProcessGroup(plans, chaos_clients.process_main,
                                        chaos_clients.ProcessReport)  # fmt: skip
        self.phases.phase(f"{NAME}: {self.settings.messages:,} messages", self.settings.messages,
                          "acked")  # fmt: skip
        timeout = self.settings.messages * SECONDS_PER_MESSAGE + 600
        try:
            return await launch.run(group, 0.0, timeout, self.watch)
        finally:
            if self._chaos is not None:
                self._chaos.cancel()
                await asyncio.gather(self._chaos, return_exceptions=True)

    async def watch(self, elapsed_s: float) -> None:
        if self._chaos is None:
            self.started = time.monotonic() - elapsed_s
            self._chaos = asyncio.create_task(self._run_chaos())
        confirmed, acked, done = self._read_progress()
        self.phases.advance(min(acked, self.settings.messages))
        if self._stop.is_set():
            return
        if done and self._drain_from is None:
            self._producing.set()  # the chaos ends after the event in progress
            await self._chaos
            self._drain_from = time.monotonic()
            self.depth.forget()
            self.phases.note(f"producers done: {confirmed:,} sends confirmed; draining")
        if time.monotonic() >= self._next_sample:
            self._next_sample = time.monotonic() + (DRAIN_POLL_S if done else SAMPLE_S)
            await self.depth.sample()
            if self._drain_from is not None:
                self._check_drained()

    def _read_progress(self) -> tuple[int, int, bool]:
        fields = chaos_clients.PROGRESS_FIELDS
        values = list(self._progress)
        confirmed = sum(values[0::fields])
        acked = sum(values[1::fields])
        return confirmed, acked, all(values[2::fields])

    def _check_drained(self) -> None:
        """Stop the consumers once the queue is empty, or has stopped draining."""
        waiting, now = self.depth.last, time.monotonic()
        if waiting is None:
            return
        stalled = now - self.depth.changed_at > DRAIN_STALL_S + self.settings.lease_s
        if waiting and not stalled:
            return
        if waiting:
            self.phases.note(f"the queue stopped draining: {waiting:,} messages left;"
                             " stopping the consumers")  # fmt: skip
        self.total_s = now - self.started
        self._stop.set()

    async def _run_chaos(self) -> None:
        """An event every kill interval; after the database restart the kills resume a
        whole interval after it is back."""
        due = self.started + self.settings.kill_interval_s
        while True:
            try:
                async with asyncio.timeout(max(0.0, due - time.monotonic())):
                    await self._producing.wait()
                return
            except TimeoutError:
                pass
            restarted = await self._chaos_event()
            due = max(due, time.monotonic() if restarted else 0.0) + self.settings.kill_interval_s

    async def _chaos_event(self) -> bool:
        """A kill, or the database restart when it is due (then True)."""
        at = time.monotonic() - self.started
        confirmed, _, _ = self._read_progress()
        half_way = confirmed >= self.settings.messages / 2
        if self.settings.restart_database and half_way and not self.restarts:
            restart = await self.cluster.restart_database()
            self.restarts.append(restart)
            self.phases.note(
                f"{at:6.1f} s  PostgreSQL restarted: fast shutdown in"
                f" {restart.stopped_s:.2f} s, back after {restart.back_s:.2f} s"
            )
            return True
        kill = await self.cluster.kill_one()
        self.kills.append(kill)
        self.phases.note(f"{at:6.1f} s  killed {kill.server} (pid {kill.pid}),"
                         f" serving again after {kill.restarted_s:.2f} s")  # fmt: skip
        return False
