-- A keyset page of the stored messages sent by client $1, after id $2: at most $3
-- rows, bodies cut to $4 characters. The walk follows the (sender_id, id) index
-- (see queue_messages.sql for why it is a row comparison).
WITH walk AS (
    SELECT m.id, m.sender_id
    FROM courier_messages m
    WHERE (m.sender_id, m.id) > ($1, $2)
    ORDER BY m.sender_id, m.id
    LIMIT $3
)
SELECT v.id, v.queue, v.queue_name, v.sender, v.sender_name, v.receiver, v.receiver_name,
       v.context, v.priority, v.created_at,
       extract(epoch FROM clock_timestamp() - v.created_at)::float8 AS age_s,
       length(v.body) AS body_chars,
       left(v.body, $4) AS body
FROM walk
JOIN courier_console_messages_v1 v ON v.id = walk.id
WHERE walk.sender_id = $1
ORDER BY v.id;
