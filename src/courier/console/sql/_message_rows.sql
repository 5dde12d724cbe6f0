-- Included by the message lists (messages_*.sql, queue_messages*.sql): the messages
-- whose ids the including query's CTE "chosen" holds, in id order, with their
-- names, age, delivery history and the first $4 bytes of the body; one primary-key
-- lookup per message.
SELECT v.id, v.queue, v.queue_name, v.sender, v.sender_name, v.receiver, v.receiver_name,
       v.context, v.priority, v.created_at,
       extract(epoch FROM clock_timestamp() - v.created_at)::float8 AS age_s,
       v.deliveries, v.dead_from, v.dead_from_name, v.failure,
       octet_length(v.body) AS body_bytes,
       substring(v.body FROM 1 FOR $4) AS body
FROM chosen
JOIN courier_console_messages_v1 v ON v.id = chosen.id
ORDER BY v.id;
