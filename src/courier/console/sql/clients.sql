-- A keyset page of clients whose name contains $1 (any case; '' matches all), after
-- id $2, at most $3 rows. $4: count cap for the per-client message counts.
SELECT c.id,
       c.name,
       c.mode,
       c.session_instance_id IS NOT NULL AS online,
       c.session_instance_id AS instance,
       c.created_at,
       (SELECT count(*) FROM (SELECT 1 FROM courier_messages m
                              WHERE m.sender_id = c.id LIMIT $4 + 1) AS s) AS sent,
       (SELECT count(*) FROM (SELECT 1 FROM courier_messages m
                              WHERE m.receiver_id = c.id LIMIT $4 + 1) AS w) AS waiting
FROM courier_clients c
WHERE c.id > $2
  AND ($1 = '' OR strpos(lower(c.name), lower($1)) > 0)
ORDER BY c.id
LIMIT $3;
