-- One client by id ($1). $2: count cap for its message counts.
SELECT c.id,
       c.name,
       c.mode,
       c.session_instance_id IS NOT NULL AS online,
       c.session_instance_id AS instance,
       c.created_at,
       (SELECT count(*) FROM (SELECT 1 FROM courier_messages m
                              WHERE m.sender_id = c.id LIMIT $2 + 1) AS s) AS sent,
       (SELECT count(*) FROM (SELECT 1 FROM courier_messages m
                              WHERE m.receiver_id = c.id LIMIT $2 + 1) AS w) AS waiting
FROM courier_clients c
WHERE c.id = $1;
