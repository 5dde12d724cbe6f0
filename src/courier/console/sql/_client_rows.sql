-- Included by client.sql and clients.sql: the clients of the including query's CTE
-- "chosen" (courier_clients rows and a count_cap column), in id order, with the
-- messages they sent and the messages waiting for them, each counted up to
-- count_cap + 1.
SELECT c.id,
       c.name,
       c.mode,
       c.session_instance_id IS NOT NULL AS online,
       c.session_instance_id AS instance,
       c.created_at,
       (SELECT count(*) FROM (SELECT 1 FROM courier_messages m
                              WHERE m.sender_id = c.id LIMIT c.count_cap + 1) AS s) AS sent,
       (SELECT count(*) FROM (SELECT 1 FROM courier_messages m
                              WHERE m.receiver_id = c.id LIMIT c.count_cap + 1) AS w) AS waiting
FROM chosen c
ORDER BY c.id;
