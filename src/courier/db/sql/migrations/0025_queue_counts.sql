-- == Queue counts in one plan (migration 0025) =====================================
-- Listing the queues, and the queues with messages for a reader, counted each
-- queue's messages through courier_count_messages_v1: one call per queue of an SQL
-- function that PostgreSQL cannot inline (a scalar function whose body reads a
-- table), each paying an executor's start-up. courier_counted_messages_v1 gives the
-- same count as a one-row table, which is inlined, so each list is one plan (as long
-- as it stays one SELECT in LANGUAGE sql, STABLE and not STRICT). The answers do
-- not change.
CREATE FUNCTION courier_counted_messages_v1(p_queue_id bigint, p_reader_id bigint, p_cap integer)
RETURNS TABLE (n bigint)
LANGUAGE sql STABLE AS $$
    SELECT count(*) FROM (
        SELECT 1 FROM courier_messages m
        WHERE m.queue_id = p_queue_id
          AND (p_reader_id IS NULL OR m.audience IN (0, p_reader_id))
        LIMIT p_cap
    ) s
$$;

CREATE OR REPLACE FUNCTION courier_count_messages_v1(p_queue_id bigint, p_reader_id bigint, p_cap integer)
RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT c.n FROM courier_counted_messages_v1(p_queue_id, p_reader_id, p_cap) c
$$;

CREATE OR REPLACE FUNCTION courier_list_queues_v2(
    p_count_cap integer,
    OUT ids bigint[], OUT names text[], OUT message_counts bigint[], OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    SELECT coalesce(array_agg(q.id ORDER BY q.id), '{}'),
           coalesce(array_agg(q.name ORDER BY q.id), '{}'),
           coalesce(array_agg(c.n ORDER BY q.id), '{}')
    INTO ids, names, message_counts
    FROM courier_queues q
    CROSS JOIN LATERAL courier_counted_messages_v1(q.id, NULL, p_count_cap) c;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

CREATE OR REPLACE FUNCTION courier_queues_for_me_v2(
    p_reader_id bigint, p_count_cap integer,
    OUT ids bigint[], OUT names text[], OUT message_counts bigint[], OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
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
