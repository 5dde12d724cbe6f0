-- One queue by id ($1), with its message count (capped at $2 + 1) and oldest message.
WITH chosen AS (
    SELECT q.*, $2::bigint AS count_cap FROM courier_queues q WHERE q.id = $1
)
-- include: _queue_rows.sql
