-- Included by queue.sql and queues.sql: the queues of the including query's CTE
-- "chosen" (courier_queues rows and a count_cap column), in id order, with their
-- settings, their messages counted up to count_cap + 1, their oldest message (the
-- first stored one, lowest id), their held messages, leased and delayed, and their
-- access lists.
-- The held messages have no index by queue: they are counted in one pass over the
-- held table for the whole page, and reported capped like the other counts.
SELECT q.id,
       q.name,
       q.created_at,
       (SELECT count(*) FROM (SELECT 1 FROM courier_messages m
                              WHERE m.queue_id = q.id LIMIT q.count_cap + 1) AS n) AS messages,
       oldest.created_at AS oldest_at,
       extract(epoch FROM clock_timestamp() - oldest.created_at)::float8 AS oldest_age_s,
       least(coalesce(held.leased, 0), q.count_cap + 1) AS leased,
       least(coalesce(held.delayed, 0), q.count_cap + 1) AS delayed,
       q.max_deliveries,
       q.dead_letter_queue_id AS dead_letter_queue,
       dlq.name AS dead_letter_queue_name,
       q.dead_letter_expired,
       q.max_messages,
       q.max_bytes,
       q.overflow,
       -- The access lists by client name (NULL: anyone; migration 0017).
       CASE WHEN q.senders IS NOT NULL THEN coalesce((
           SELECT array_agg(c.name ORDER BY c.name) FROM courier_clients c
           WHERE c.id = ANY (q.senders)), '{}') END AS senders,
       CASE WHEN q.readers IS NOT NULL THEN coalesce((
           SELECT array_agg(c.name ORDER BY c.name) FROM courier_clients c
           WHERE c.id = ANY (q.readers)), '{}') END AS readers
FROM chosen q
LEFT JOIN LATERAL (  -- the first index entry at or after (queue, 0): one entry read
    SELECT m.queue_id, m.created_at FROM courier_messages m
    WHERE (m.queue_id, m.id) > (q.id, 0)
    ORDER BY m.queue_id, m.id
    LIMIT 1
) AS oldest ON oldest.queue_id = q.id
LEFT JOIN courier_queues dlq ON dlq.id = q.dead_letter_queue_id
LEFT JOIN (
    SELECT h.queue_id,
           count(*) FILTER (WHERE h.delivery_id IS NOT NULL) AS leased,
           count(*) FILTER (WHERE h.delivery_id IS NULL) AS delayed
    FROM courier_held_messages h
    WHERE h.queue_id IN (SELECT c.id FROM chosen c)
    GROUP BY h.queue_id
) AS held ON held.queue_id = q.id
ORDER BY q.id;
