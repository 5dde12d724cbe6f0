"""What every view gets: the pool and friends, opened once in the app's lifespan."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg
from starlette.requests import Request

from courier.console import member_rates, node_pools, queries, rates, sessions, settings
from courier.db import _translate, pools, repository

STATE_KEY = "console"

# Every console read is a LIMITed index walk; these settings keep the planner from
# trading one for a plan that is cheaper on average but unbounded on a skewed table:
# a bitmap scan reads every match before a LIMIT can stop it, a sequential scan for
# a rare queue reads the whole table, and a generic plan made for an average queue
# may walk a huge one. Planning each statement for its actual parameters costs well
# under a millisecond.
SESSION_SETTINGS = {
    "enable_bitmapscan": "off",
    "enable_seqscan": "off",
    "plan_cache_mode": "force_custom_plan",
    **pools.SESSION_SETTINGS,  # what every pool of Courier's sets (JIT off)
}


@dataclass(frozen=True, slots=True)
class ConsoleState:
    settings: settings.ConsoleSettings
    pool: asyncpg.Pool
    repository: repository.ConsoleRepository
    sampler: rates.RateSampler
    sessions: sessions.SessionStore
    members: member_rates.MemberSampler
    node_pools: node_pools.NodePools


def of(request: Request) -> ConsoleState:
    """The typed state the lifespan put on every request."""
    console = getattr(request.state, STATE_KEY)
    assert isinstance(console, ConsoleState)
    return console


async def open_pool(console_settings: settings.ConsoleSettings) -> asyncpg.Pool:
    """The console's own small pool; Unavailable when the database cannot be reached."""
    try:
        return await asyncpg.create_pool(
            console_settings.dsn,
            min_size=1,
            max_size=console_settings.pool_max_size,
            server_settings=SESSION_SETTINGS,
        )
    except _translate.TRANSLATED as exc:
        raise _translate.translate(exc) from exc


@contextlib.asynccontextmanager
async def opened(
    console_settings: settings.ConsoleSettings, store: sessions.SessionStore
) -> AsyncIterator[ConsoleState]:
    """Open the pool and start the rate samplers; close all on the way out. Pools on
    the cluster's other nodes open when a page first needs them."""
    repo = repository.ConsoleRepository(await open_pool(console_settings))
    others = node_pools.NodePools(SESSION_SETTINGS)
    try:
        sampler = rates.RateSampler(
            lambda: queries.message_counters(repo.pool),
            console_settings.rate_interval_s,
            console_settings.rate_window_s,
        )
        members = member_rates.MemberSampler(
            lambda: queries.member_totals(repo.pool), console_settings.rate_interval_s
        )
        async with rates.running(sampler), rates.running(members):
            yield ConsoleState(console_settings, repo.pool, repo, sampler, store, members, others)
    finally:
        await others.close()
        await repo.close()
