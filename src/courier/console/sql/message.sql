-- One message by id ($1), with its whole body.
SELECT id, queue, queue_name, sender, sender_name, receiver, receiver_name, context,
       priority, created_at,
       extract(epoch FROM clock_timestamp() - created_at)::float8 AS age_s,
       length(body) AS body_chars,
       body
FROM courier_console_messages_v1
WHERE id = $1;
