-- A keyset page of queues whose name contains $1 (any case; '' matches all), after
-- id $2, at most $3 rows. $4: count cap. The oldest message is the queue's first
-- stored one (lowest id).
SELECT q.id,
       q.name,
       q.created_at,
       (SELECT count(*) FROM (SELECT 1 FROM courier_messages m
                              WHERE m.queue_id = q.id LIMIT $4 + 1) AS n) AS messages,
       oldest.created_at AS oldest_at,
       extract(epoch FROM clock_timestamp() - oldest.created_at)::float8 AS oldest_age_s
FROM courier_queues q
LEFT JOIN LATERAL (  -- the first index entry at or after (queue, 0): one entry read
    SELECT m.queue_id, m.created_at FROM courier_messages m
    WHERE (m.queue_id, m.id) > (q.id, 0)
    ORDER BY m.queue_id, m.id
    LIMIT 1
) AS oldest ON oldest.queue_id = q.id
WHERE q.id > $2
  AND ($1 = '' OR strpos(lower(q.name), lower($1)) > 0)
ORDER BY q.id
LIMIT $3;
