-- A keyset page of replicated queues after id $1, at most $2 of them, each with its
-- members: one row per member (a replicated queue without any is one row whose
-- member columns are NULL), ordered by replicated queue, then member number. Each
-- member's producers and consumers are the places taken in it.
WITH chosen AS (
    SELECT r.id, r.name, r.policy FROM courier_replicated_queues r
    WHERE r.id > $1 ORDER BY r.id LIMIT $2
)
SELECT r.id AS replicated,
       r.name,
       r.policy,
       m.member_no AS member,
       m.node_id AS node,
       m.queue_id AS queue,
       m.queue_name,
       CASE WHEN m.member_no IS NOT NULL THEN
           (SELECT count(*) FROM courier_replica_clients c
            WHERE c.replicated_id = r.id AND c.member_no = m.member_no AND c.role = 'producer')
       END AS producers,
       CASE WHEN m.member_no IS NOT NULL THEN
           (SELECT count(*) FROM courier_replica_clients c
            WHERE c.replicated_id = r.id AND c.member_no = m.member_no AND c.role = 'consumer')
       END AS consumers
FROM chosen r
LEFT JOIN courier_replicas m ON m.replicated_id = r.id
ORDER BY r.id, m.member_no;
