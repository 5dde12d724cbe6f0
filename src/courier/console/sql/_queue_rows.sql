-- Included by queue.sql and queues.sql: the queues of the including query's CTE
-- "chosen" (courier_queues rows and a count_cap column), in id order, with their
-- messages counted up to count_cap + 1 and their oldest message, the first stored
-- one (lowest id).
SELECT q.id,
       q.name,
       q.created_at,
       (SELECT count(*) FROM (SELECT 1 FROM courier_messages m
                              WHERE m.queue_id = q.id LIMIT q.count_cap + 1) AS n) AS messages,
       oldest.created_at AS oldest_at,
       extract(epoch FROM clock_timestamp() - oldest.created_at)::float8 AS oldest_age_s
FROM chosen q
LEFT JOIN LATERAL (  -- the first index entry at or after (queue, 0): one entry read
    SELECT m.queue_id, m.created_at FROM courier_messages m
    WHERE (m.queue_id, m.id) > (q.id, 0)
    ORDER BY m.queue_id, m.id
    LIMIT 1
) AS oldest ON oldest.queue_id = q.id
ORDER BY q.id;
