-- The cluster's nodes, removed ones included, with how many queues each holds by
-- the control node's directory of queue names (one pass over it). A database that
-- never had another node keeps no rows: it is node 1 alone, reached at $1.
WITH listed AS (
    SELECT n.id, n.dsn, n.state, n.capacity FROM courier_nodes n
    UNION ALL
    SELECT 1, $1, 'active', NULL
    WHERE NOT EXISTS (SELECT FROM courier_nodes n WHERE n.id = 1)
), held AS (
    SELECT h.node_id, count(*) AS queues FROM courier_queue_homes h GROUP BY h.node_id
)
SELECT l.id, l.dsn, l.state, l.capacity, coalesce(held.queues, 0) AS queues
FROM listed l
LEFT JOIN held ON held.node_id = l.id
ORDER BY l.id;
