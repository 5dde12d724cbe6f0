-- One message by id ($1), with its whole body and where it is: visible in its queue,
-- or held (leased to a reader until it acknowledges, or delayed) until visible_at.
-- A message is in one of the two tables at a time; each is one primary-key lookup.
SELECT id, queue, queue_name, sender, sender_name, receiver, receiver_name, context,
       priority, created_at,
       extract(epoch FROM clock_timestamp() - created_at)::float8 AS age_s,
       deliveries, dead_from, dead_from_name, failure,
       octet_length(body) AS body_bytes,
       body,
       properties,
       'visible' AS state,
       NULL::timestamptz AS visible_at,
       NULL::bigint AS holder,
       NULL::text AS holder_name
FROM courier_console_messages_v1
WHERE id = $1
UNION ALL
SELECT h.id, h.queue_id, q.name, h.sender_id, s.name, h.receiver_id, r.name, h.context,
       h.priority::integer, h.created_at,
       extract(epoch FROM clock_timestamp() - h.created_at)::float8,
       h.deliveries, h.dead_from, d.name, h.failure,
       octet_length(h.body),
       h.body,
       h.properties,
       CASE WHEN h.delivery_id IS NULL THEN 'delayed' ELSE 'leased' END,
       h.visible_at,
       h.holder_id,
       c.name
FROM courier_held_messages h
JOIN courier_queues q ON q.id = h.queue_id
LEFT JOIN courier_clients s ON s.id = h.sender_id
LEFT JOIN courier_clients r ON r.id = h.receiver_id
LEFT JOIN courier_clients c ON c.id = h.holder_id
LEFT JOIN courier_queues d ON d.id = h.dead_from
WHERE h.id = $1
LIMIT 1;
