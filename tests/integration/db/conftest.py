"""Small building blocks for the database-tier tests (on top of tests/conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest
from db_helpers import CountingRepository

from courier import models
from courier.db import batching, repository


@pytest.fixture
async def batched_repo(pool: asyncpg.Pool) -> AsyncIterator[batching.BatchedRepository]:
    """The batched repository on the test's pool. It keeps a connection between
    calls, which it must hand back before the pool can close."""
    made = batching.BatchedRepository(pool)
    yield made
    await made.release_connection()


@pytest.fixture
async def batched(pool: asyncpg.Pool) -> AsyncIterator[CountingRepository]:
    """The batched repository, noting the operations of every batched call."""
    made = CountingRepository(pool)
    yield made
    await made.release_connection()  # else the pool waits for it to close


@pytest.fixture
async def writer(repo: repository.Repository) -> models.ClientInfo:
    return await repo.register_client("writer")


@pytest.fixture
async def reader(repo: repository.Repository) -> models.ClientInfo:
    return await repo.register_client("reader")


@pytest.fixture
async def queue(repo: repository.Repository) -> models.Queue:
    return await repo.create_queue("jobs")


@pytest.fixture
async def instance(repo: repository.Repository) -> int:
    """A registered middleware instance, for leases."""
    return (await repo.register_instance("127.0.0.1:1")).id


@pytest.fixture
async def dead_letters(repo: repository.Repository) -> models.Queue:
    return await repo.create_queue("dead")
