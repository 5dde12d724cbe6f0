-- == Queue counts in one plan (migration 0025) =====================================
-- Listing the queues, the queues with messages for a reader, and the topics with
-- their subscriptions' backlogs counted each queue's messages through
-- courier_count_messages_v1: one call per queue of an SQL function that PostgreSQL
-- cannot inline (a scalar function whose body reads a table), each paying an
-- executor's start-up. courier_counted_messages_v1 gives the same count as a
-- one-row table, which is inlined, so each list is one plan (as long as it stays
-- one SELECT in LANGUAGE sql, STABLE and not STRICT). The answers do not change.
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

CREATE OR REPLACE FUNCTION courier_topics_v1(p_id bigint, p_name text, p_count_cap integer)
RETURNS TABLE (topic_id bigint, topic_name text, queue_id bigint, queue_name text,
               name text, durable boolean, subscriber_id bigint, backlog bigint,
               exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    IF (p_id IS NOT NULL OR p_name IS NOT NULL) AND NOT EXISTS (
        SELECT 1 FROM courier_topics t WHERE t.id = p_id OR (p_id IS NULL AND t.name = p_name)
    ) THEN
        PERFORM courier_fail_v1(48, format('topic %s does not exist', coalesce(p_id::text, p_name)));
    END IF;
    RETURN QUERY
    SELECT t.id, t.name, s.queue_id, q.name, s.name, s.durable, s.subscriber_id, c.n,
           courier_elapsed_ns_v1(v_started)
    FROM courier_topics t
    LEFT JOIN courier_subscriptions s ON s.topic_id = t.id
    LEFT JOIN courier_queues q ON q.id = s.queue_id
    LEFT JOIN LATERAL courier_counted_messages_v1(s.queue_id, NULL, p_count_cap) c
        ON s.queue_id IS NOT NULL
    WHERE (p_id IS NULL AND p_name IS NULL) OR t.id = p_id OR (p_id IS NULL AND t.name = p_name)
    ORDER BY t.id, s.queue_id;
END;
$$;
