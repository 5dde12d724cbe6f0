"""A look behind the servers' backs: where the database keeps a queue's messages."""

from __future__ import annotations

import asyncpg

PERSISTENCE = """
SELECT m.body, m.tableoid = 'courier_messages_persistent'::regclass AS persistent
FROM courier_messages m JOIN courier_queues q ON q.id = m.queue_id
WHERE q.id = $1 OR q.name = $2
"""


async def persistence(dsn: str, queue: int | str) -> dict[bytes, bool]:
    """Each ready message of the queue (by id or name), and whether it is in the
    persistent partition (False: the unlogged one)."""
    connection = await asyncpg.connect(dsn)
    try:
        key, name = (queue, None) if isinstance(queue, int) else (None, queue)
        rows = await connection.fetch(PERSISTENCE, key, name)
        return {row["body"]: row["persistent"] for row in rows}
    finally:
        await connection.close()
