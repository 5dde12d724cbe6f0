-- A keyset page of queue $1's messages after id $2: at most $3 rows, bodies cut to
-- $4 characters.
-- The walk is written as a row comparison in (queue_id, id) order, which only the
-- (queue_id, id) index can serve, so it reads at most $3 index entries whatever the
-- statistics say; entries of the next queue that fill up a last page are dropped.
WITH walk AS (
    SELECT m.id, m.queue_id
    FROM courier_messages m
    WHERE (m.queue_id, m.id) > ($1, $2)
    ORDER BY m.queue_id, m.id
    LIMIT $3
)
SELECT v.id, v.queue, v.queue_name, v.sender, v.sender_name, v.receiver, v.receiver_name,
       v.context, v.priority, v.created_at,
       extract(epoch FROM clock_timestamp() - v.created_at)::float8 AS age_s,
       length(v.body) AS body_chars,
       left(v.body, $4) AS body
FROM walk
JOIN courier_console_messages_v1 v ON v.id = walk.id
WHERE walk.queue_id = $1
ORDER BY v.id;
