-- Migration 0038: the queues holding a message for the reader are found from those
-- messages first. The whole current schema, documented, is schema.sql.
--
-- courier_queues_for_me_v2 counted each queue's messages for the reader with an index
-- probe per queue, through both partitions: its cost grew with the number of queues,
-- whether or not they held anything for the reader (about 3 µs a queue: 0.24 ms with
-- 82 queues, 16–19 ms with 10,000). It now first reads the reader's messages
-- themselves, from every queue it may read in one index scan of each partition, and
-- stops after READABLE_FIRST (1,000) of them. When there are fewer, it has seen them
-- all, so each count is exact (and capped as before), and no queue without such a
-- message costs a probe: 0.14 ms with 82 queues, 1.7 ms with 10,000 (pgbench, one
-- client, PostgreSQL 18; on PostgreSQL 15, whose index scans walk down the index again
-- for each key of an = ANY, 4.9–6.1 ms against 15–18 ms). Only a reader with 1,000
-- messages or more to read is counted queue by queue, as before. Bitmap scans are off:
-- one would read every readable message before the LIMIT. The answers do not change.
CREATE OR REPLACE FUNCTION courier_queues_for_me_v2(
    p_reader_id bigint, p_count_cap integer,
    OUT ids bigint[], OUT names text[], OUT message_counts bigint[], OUT exec_ns bigint)
LANGUAGE plpgsql
SET enable_seqscan = off  -- see courier_list_queues_v2
-- A bitmap scan would read every readable message before the LIMIT.
SET enable_bitmapscan = off
AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
    v_readable_first CONSTANT integer := 1000;
    v_seen bigint;
BEGIN
    IF p_reader_id IS NOT NULL AND coalesce(p_count_cap, 1) > 0 THEN
        SELECT coalesce(array_agg(c.queue_id ORDER BY c.queue_id), '{}'),
               coalesce(array_agg(q.name ORDER BY c.queue_id), '{}'),
               coalesce(array_agg(least(c.n, p_count_cap) ORDER BY c.queue_id), '{}'),
               coalesce(sum(c.n), 0)
        INTO ids, names, message_counts, v_seen
        FROM (SELECT s.queue_id, count(*) AS n
              FROM (SELECT m.queue_id FROM courier_messages m
                    WHERE m.queue_id = ANY (ARRAY(
                              SELECT q.id FROM courier_queues q
                              WHERE q.readers IS NULL
                                 OR courier_allows_v1(p_reader_id, q.created_by, q.readers)))
                      AND m.audience = ANY (ARRAY[0, p_reader_id])
                    LIMIT v_readable_first) s
              GROUP BY s.queue_id) c
        JOIN courier_queues q ON q.id = c.queue_id;
        IF v_seen < v_readable_first THEN
            exec_ns := courier_elapsed_ns_v1(v_started);
            RETURN;
        END IF;
    END IF;
    SELECT coalesce(array_agg(q.id ORDER BY q.id), '{}'),
           coalesce(array_agg(q.name ORDER BY q.id), '{}'),
           coalesce(array_agg(c.n ORDER BY q.id), '{}')
    INTO ids, names, message_counts
    FROM courier_queues q
    CROSS JOIN LATERAL courier_counted_messages_v1(q.id, p_reader_id, p_count_cap) c
    WHERE (q.readers IS NULL OR courier_allows_v1(p_reader_id, q.created_by, q.readers))
      AND c.n > 0;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;
