-- Migration 0009: a client may create only so many queues, and listings count each
-- queue's messages up to a cap instead of scanning a queue of any size.

ALTER TABLE courier_queues
    ADD COLUMN created_by bigint REFERENCES courier_clients (id) ON DELETE SET NULL;
CREATE INDEX courier_queues_created_by ON courier_queues (created_by)
    WHERE created_by IS NOT NULL;

-- The messages of a queue, counted up to p_cap: the work is bounded whatever the
-- queue holds (held messages are not counted, as before).
CREATE FUNCTION courier_count_messages_v1(p_queue_id bigint, p_reader_id bigint, p_cap integer)
RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT count(*) FROM (
        SELECT 1 FROM courier_messages m
        WHERE m.queue_id = p_queue_id
          AND (p_reader_id IS NULL OR m.audience IN (0, p_reader_id))
        LIMIT p_cap
    ) s
$$;

-- Creates a queue for p_creator (NULL: the console's admin, who has no quota). A
-- client that already created p_max_queues queues gets QUOTA_EXCEEDED (18). The
-- creator's row is locked first (NO KEY UPDATE: its sends' key-share locks do not
-- wait), so two concurrent creates of one client cannot both pass the count.
CREATE FUNCTION courier_create_queue_v2(
    p_name text, p_creator bigint, p_max_queues integer,
    OUT id bigint, OUT name text, OUT message_count bigint, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
    v_created bigint;
BEGIN
    PERFORM courier_check_name_v1(p_name, 'queue');
    IF p_creator IS NOT NULL AND p_max_queues IS NOT NULL THEN
        PERFORM 1 FROM courier_clients c WHERE c.id = p_creator FOR NO KEY UPDATE;
        SELECT count(*) INTO v_created FROM (
            SELECT 1 FROM courier_queues q WHERE q.created_by = p_creator LIMIT p_max_queues
        ) s;
        IF v_created >= p_max_queues THEN
            PERFORM courier_fail_v1(18, format(
                'this client has created %s queues, the most one client may: delete one first',
                v_created));
        END IF;
    END IF;
    -- ON CONFLICT waits for a concurrent insert of the same name, so of two
    -- concurrent creates exactly one succeeds.
    INSERT INTO courier_queues (name, created_by) VALUES (p_name, p_creator)
    ON CONFLICT (name) DO NOTHING
    RETURNING courier_queues.id, courier_queues.name, 0 INTO id, name, message_count;
    IF NOT FOUND THEN
        PERFORM courier_fail_v1(2, format('queue %s exists', p_name));
    END IF;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

CREATE FUNCTION courier_get_queue_v2(
    p_id bigint, p_name text, p_count_cap integer,
    OUT id bigint, OUT name text, OUT message_count bigint, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    IF p_id IS NOT NULL THEN
        SELECT q.id, q.name INTO id, name FROM courier_queues q WHERE q.id = p_id;
    ELSE
        SELECT q.id, q.name INTO id, name FROM courier_queues q WHERE q.name = p_name;
    END IF;
    IF NOT FOUND THEN
        PERFORM courier_fail_v1(1, format('queue %s does not exist', coalesce(p_id::text, p_name)));
    END IF;
    message_count := courier_count_messages_v1(courier_get_queue_v2.id, NULL, p_count_cap);
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

CREATE FUNCTION courier_list_queues_v2(
    p_count_cap integer,
    OUT ids bigint[], OUT names text[], OUT message_counts bigint[], OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    SELECT coalesce(array_agg(q.id ORDER BY q.id), '{}'),
           coalesce(array_agg(q.name ORDER BY q.id), '{}'),
           coalesce(array_agg(courier_count_messages_v1(q.id, NULL, p_count_cap) ORDER BY q.id),
                    '{}')
    INTO ids, names, message_counts
    FROM courier_queues q;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

CREATE FUNCTION courier_queues_for_me_v2(
    p_reader_id bigint, p_count_cap integer,
    OUT ids bigint[], OUT names text[], OUT message_counts bigint[], OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    SELECT coalesce(array_agg(c.id ORDER BY c.id), '{}'),
           coalesce(array_agg(c.name ORDER BY c.id), '{}'),
           coalesce(array_agg(c.n ORDER BY c.id), '{}')
    INTO ids, names, message_counts
    FROM (
        SELECT q.id, q.name, courier_count_messages_v1(q.id, p_reader_id, p_count_cap) AS n
        FROM courier_queues q
    ) c
    WHERE c.n > 0;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;
