-- == Selectors (migration 0019) =====================================================
-- A read may carry a selector: a jsonpath predicate over the message's properties,
-- built by the middleware (courier.selectors) with every literal a variable of
-- p_vars and every property name a quoted, escaped key, and passed as a bound
-- parameter. A message is taken only when jsonb_path_match says true (silent: an
-- error or unknown is not true). A message without properties is matched as {}.
-- The new read functions take the selector beside the old ones; a NULL selector
-- runs the old function unchanged, with its plans.

-- Up to p_count messages visible to p_reader_id that the selector matches, in read
-- order, from one queue (p_queue_id) or, with only a sender, from every queue the
-- reader may read; locked (FOR UPDATE SKIP LOCKED) when p_lock. One statement walks
-- both audiences (for anyone, and the reader's own) of the queue's index, filters
-- as it goes and keeps the first p_count in read order; the queue and the sender-only
-- reads are separate statements, so a generic plan of either still uses its index.
CREATE FUNCTION courier_select_ids_v1(
    p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text,
    p_count integer, p_lock boolean, p_selector jsonpath, p_vars jsonb)
RETURNS bigint[]
LANGUAGE plpgsql AS $$
DECLARE
    v_hidden bigint[];  -- queues the reader may not read
BEGIN
    IF p_queue_id IS NOT NULL AND p_lock THEN
        RETURN ARRAY(
            SELECT m.id FROM courier_messages m
            WHERE m.queue_id = p_queue_id AND m.audience IN (0, p_reader_id)
              AND (p_sender_id IS NULL OR m.sender_id = p_sender_id)
              AND jsonb_path_match(coalesce(m.properties, '{}'), p_selector, p_vars, true)
            ORDER BY (CASE WHEN p_order = 'priority' THEN m.priority END) DESC NULLS LAST,
                     m.created_at, m.id
            LIMIT p_count FOR UPDATE SKIP LOCKED);
    ELSIF p_queue_id IS NOT NULL THEN
        RETURN ARRAY(
            SELECT m.id FROM courier_messages m
            WHERE m.queue_id = p_queue_id AND m.audience IN (0, p_reader_id)
              AND (p_sender_id IS NULL OR m.sender_id = p_sender_id)
              AND jsonb_path_match(coalesce(m.properties, '{}'), p_selector, p_vars, true)
            ORDER BY (CASE WHEN p_order = 'priority' THEN m.priority END) DESC NULLS LAST,
                     m.created_at, m.id
            LIMIT p_count);
    END IF;
    v_hidden := courier_unreadable_v1(p_reader_id);
    IF p_lock THEN
        RETURN ARRAY(
            SELECT m.id FROM courier_messages m
            WHERE m.sender_id = p_sender_id AND m.audience IN (0, p_reader_id)
              AND m.queue_id <> ALL (v_hidden)
              AND jsonb_path_match(coalesce(m.properties, '{}'), p_selector, p_vars, true)
            ORDER BY (CASE WHEN p_order = 'priority' THEN m.priority END) DESC NULLS LAST,
                     m.created_at, m.id
            LIMIT p_count FOR UPDATE SKIP LOCKED);
    END IF;
    RETURN ARRAY(
        SELECT m.id FROM courier_messages m
        WHERE m.sender_id = p_sender_id AND m.audience IN (0, p_reader_id)
          AND m.queue_id <> ALL (v_hidden)
          AND jsonb_path_match(coalesce(m.properties, '{}'), p_selector, p_vars, true)
        ORDER BY (CASE WHEN p_order = 'priority' THEN m.priority END) DESC NULLS LAST,
                 m.created_at, m.id
        LIMIT p_count);
END;
$$;

-- The checks every read makes before it looks: a known order, a lease only on a pop,
-- the queue exists, and the reader is on its read list.
CREATE FUNCTION courier_check_read_v1(
    p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text, p_pop boolean,
    p_lease_ms integer)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_readers bigint[];
    v_owner bigint;
BEGIN
    IF p_queue_id IS NULL AND p_sender_id IS NULL THEN
        PERFORM courier_fail_v1(10, 'a read needs a queue or a sender');
    END IF;
    IF p_order IS NULL OR p_order NOT IN ('time', 'priority') THEN
        PERFORM courier_fail_v1(10, 'order must be time or priority');
    END IF;
    IF p_lease_ms < 0 OR (p_lease_ms > 0 AND NOT p_pop) THEN
        PERFORM courier_fail_v1(10, 'a lease is a positive time, and only a pop takes one');
    END IF;
    IF p_queue_id IS NOT NULL THEN
        SELECT q.readers, q.created_by INTO v_readers, v_owner
        FROM courier_queues q WHERE q.id = p_queue_id;
        IF NOT FOUND THEN
            PERFORM courier_fail_v1(1, format('queue %s does not exist', p_queue_id));
        ELSIF v_readers IS NOT NULL AND NOT courier_allows_v1(p_reader_id, v_owner, v_readers) THEN
            PERFORM courier_fail_v1(13, format(
                'client %s may not read queue %s (not on its read list)', p_reader_id, p_queue_id));
        END IF;
    END IF;
END;
$$;

-- Pops up to p_count visible messages the selector matches, in read order (after
-- courier_check_read_v1), each leased when p_lease_ms > 0. Both selective pops take
-- their messages here.
CREATE FUNCTION courier_take_selected_v1(
    p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text,
    p_count integer, p_lease_ms integer, p_instance_id bigint, p_selector jsonpath,
    p_vars jsonb)
RETURNS TABLE (id bigint, queue_id bigint, sender_id bigint, receiver_id bigint,
               context bigint, priority smallint, created_at timestamptz, body bytea,
               deliveries integer, delivery_id bigint, dead_from bigint, failure text,
               properties jsonb)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_id bigint;
    v_taken courier_messages%ROWTYPE;
    v_lease record;
BEGIN
    FOREACH v_id IN ARRAY courier_select_ids_v1(
            p_reader_id, p_queue_id, p_sender_id, p_order, p_count, true, p_selector, p_vars)
    LOOP
        DELETE FROM courier_messages m WHERE m.id = v_id RETURNING m.* INTO v_taken;
        SELECT NULL::bigint AS delivery_id, v_taken.deliveries AS deliveries INTO v_lease;
        IF p_lease_ms > 0 THEN
            SELECT * INTO v_lease
            FROM courier_lease_v1(v_taken, p_lease_ms, p_reader_id, p_instance_id);
        END IF;
        RETURN QUERY SELECT v_taken.id, v_taken.queue_id, v_taken.sender_id,
            v_taken.receiver_id, v_taken.context, v_taken.priority, v_taken.created_at,
            v_taken.body, v_lease.deliveries, v_lease.delivery_id, v_taken.dead_from,
            v_taken.failure, v_taken.properties;
    END LOOP;
END;
$$;

-- courier_read_v3 with a selector: peek or pop the first visible message it matches.
CREATE FUNCTION courier_read_v4(
    p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text, p_pop boolean,
    p_lease_ms integer, p_instance_id bigint, p_selector jsonpath, p_vars jsonb,
    OUT status smallint, OUT id bigint, OUT queue_id bigint, OUT sender_id bigint,
    OUT receiver_id bigint, OUT context bigint, OUT priority smallint,
    OUT created_at timestamptz, OUT body bytea, OUT deliveries integer,
    OUT delivery_id bigint, OUT dead_from bigint, OUT failure text, OUT properties jsonb,
    OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
    v_id bigint;
BEGIN
    IF p_selector IS NULL THEN
        SELECT * INTO status, id, queue_id, sender_id, receiver_id, context, priority,
               created_at, body, deliveries, delivery_id, dead_from, failure, properties,
               exec_ns
        FROM courier_read_v3(p_reader_id, p_queue_id, p_sender_id, p_order, p_pop,
                             p_lease_ms, p_instance_id);
        RETURN;
    END IF;
    PERFORM courier_check_read_v1(
        p_reader_id, p_queue_id, p_sender_id, p_order, p_pop, p_lease_ms);
    IF p_pop THEN
        SELECT 0, t.* INTO status, id, queue_id, sender_id, receiver_id, context, priority,
               created_at, body, deliveries, delivery_id, dead_from, failure, properties
        FROM courier_take_selected_v1(p_reader_id, p_queue_id, p_sender_id, p_order, 1,
                                      p_lease_ms, p_instance_id, p_selector, p_vars) t;
    ELSE
        FOR v_attempt IN 1..100 LOOP
            v_id := (courier_select_ids_v1(p_reader_id, p_queue_id, p_sender_id, p_order, 1,
                                           false, p_selector, p_vars))[1];
            EXIT WHEN v_id IS NULL;
            SELECT 0, m.id, m.queue_id, m.sender_id, m.receiver_id, m.context, m.priority,
                   m.created_at, m.body, m.deliveries, NULL, m.dead_from, m.failure,
                   m.properties
            INTO status, id, queue_id, sender_id, receiver_id, context, priority,
                 created_at, body, deliveries, delivery_id, dead_from, failure, properties
            FROM courier_messages m WHERE m.id = v_id;
            EXIT WHEN FOUND;  -- else a pop took the picked message: pick again
        END LOOP;
        IF v_id IS NOT NULL AND status IS NULL THEN  -- every peek lost its race
            PERFORM courier_fail_v1(16, 'a peek lost 100 races in a row to concurrent pops');
        END IF;
    END IF;
    IF status IS NULL THEN  -- nothing matched
        status := CASE WHEN p_queue_id IS NULL THEN 4 ELSE 5 END;
    END IF;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- courier_pop_many_v2 with a selector: up to p_count matching messages, in read order.
CREATE FUNCTION courier_pop_many_v3(
    p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text,
    p_count integer, p_lease_ms integer, p_instance_id bigint, p_selector jsonpath,
    p_vars jsonb)
RETURNS TABLE (id bigint, queue_id bigint, sender_id bigint, receiver_id bigint,
               context bigint, priority smallint, created_at timestamptz, body bytea,
               deliveries integer, delivery_id bigint, dead_from bigint, failure text,
               properties jsonb, exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    IF p_selector IS NULL THEN
        RETURN QUERY
        SELECT * FROM courier_pop_many_v2(p_reader_id, p_queue_id, p_sender_id, p_order,
                                          p_count, p_lease_ms, p_instance_id);
        RETURN;
    END IF;
    IF p_count IS NULL OR p_count < 1 THEN
        PERFORM courier_fail_v1(10, 'a batch read takes at least one message');
    END IF;
    IF p_queue_id IS NULL THEN
        PERFORM courier_fail_v1(10, 'a batch read needs a queue');
    END IF;
    PERFORM courier_check_read_v1(
        p_reader_id, p_queue_id, p_sender_id, p_order, true, coalesce(p_lease_ms, 0));
    RETURN QUERY
    SELECT t.*, courier_elapsed_ns_v1(v_started)
    FROM courier_take_selected_v1(p_reader_id, p_queue_id, p_sender_id, p_order, p_count,
                                  coalesce(p_lease_ms, 0), p_instance_id, p_selector,
                                  p_vars) t;
END;
$$;
