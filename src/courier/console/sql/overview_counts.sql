-- The overview's totals. $1: count cap.
-- Messages are counted exactly up to the cap; above it the planner's estimate (the
-- table's tuple density times its current size) stands in, so this stays cheap
-- with millions of rows.
WITH capped AS (
    SELECT count(*) AS n FROM (SELECT 1 FROM courier_messages LIMIT $1 + 1) AS firsts
), estimate AS (
    -- Summed over both partitions of the table (persistent and not).
    SELECT coalesce(sum(CASE WHEN c.relpages > 0
                THEN (c.reltuples / c.relpages
                      * (pg_relation_size(c.oid) / current_setting('block_size')::bigint))::bigint
                ELSE 0 END), 0)::bigint AS n
    FROM pg_class c
    WHERE c.oid IN (SELECT p.relid FROM pg_partition_tree('courier_messages') p WHERE p.isleaf)
)
SELECT
    (SELECT count(*) FROM courier_clients) AS clients_total,
    (SELECT count(*) FROM courier_clients WHERE session_instance_id IS NOT NULL) AS clients_online,
    (SELECT count(*) FROM courier_queues) AS queues_total,
    CASE WHEN capped.n <= $1 THEN capped.n
         ELSE greatest(estimate.n, capped.n) END AS messages_total,
    capped.n <= $1 AS messages_exact
FROM capped, estimate;
