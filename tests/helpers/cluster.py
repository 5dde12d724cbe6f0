"""A cluster of two database nodes for the tests: ``two_nodes(dsn, empty_dsn)``.

``empty_dsn`` joins ``dsn``'s cluster as node 2, and the block gets a routed backend
over both (plain repositories, node 2 attached), closed afterwards.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from courier.db import nodes, repository, routing


@contextlib.asynccontextmanager
async def two_nodes(
    dsn: str, empty_dsn: str, *, capacity: int | None = None
) -> AsyncIterator[routing.RoutedBackend]:
    await nodes.add_node(dsn, empty_dsn, capacity=capacity)
    control = await repository.Repository.connect(dsn)
    second = await repository.Repository.connect(empty_dsn)
    backend = routing.RoutedBackend(control)
    backend.attach(2, second)
    try:
        yield backend
    finally:
        await control.close()
        await second.close()
