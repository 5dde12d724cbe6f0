-- A keyset page of queue $1's messages after id $2: at most $3 rows, bodies cut to
-- $4 bytes.
-- The walk is written as a row comparison in (queue_id, id) order, which only the
-- (queue_id, id) index can serve, so it reads at most $3 index entries whatever the
-- statistics say; entries of the next queue that fill up a last page are dropped.
WITH walk AS (
    SELECT m.id, m.queue_id
    FROM courier_messages m
    WHERE (m.queue_id, m.id) > ($1, $2)
    ORDER BY m.queue_id, m.id
    LIMIT $3
), chosen AS (
    SELECT id FROM walk WHERE queue_id = $1
)
-- include: _message_rows.sql
