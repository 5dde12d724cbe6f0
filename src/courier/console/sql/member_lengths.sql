-- On the node holding them: the visible messages of each queue in $1, counted up to
-- $2 + 1 (the count cap); NULL for a queue the node no longer has.
SELECT u.id AS queue,
       CASE WHEN q.id IS NOT NULL THEN
           (SELECT count(*) FROM (SELECT 1 FROM courier_messages m
                                  WHERE m.queue_id = u.id LIMIT $2 + 1) AS n)
       END AS length
FROM unnest($1::bigint[]) AS u(id)
LEFT JOIN courier_queues q ON q.id = u.id;
