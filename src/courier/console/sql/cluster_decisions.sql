-- The controller's latest $1 decisions, newest first.
SELECT d.id, d.decided_at, d.replicated, d.decision, d.member_no AS member, d.node_id AS node,
       d.moved, d.clients, d.capacity, d.load, d.length
FROM courier_cluster_decisions d
ORDER BY d.id DESC
LIMIT $1;
