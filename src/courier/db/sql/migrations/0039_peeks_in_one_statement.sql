-- Migration 0039: a peek reads its message in one statement. The whole current schema,
-- documented, is schema.sql.
--
-- courier_read_v3 peeked in two statements and a call: courier_pick_v1 listed the
-- first four visible ids (both audiences, in read order), then the first of them was
-- read by id, and when a concurrent pop had taken it meanwhile, all of it ran again.
-- A statement on the partitioned message table costs its plan's setup on each
-- partition whatever it reads, so the peek now reads the first visible message whole
-- in the statement that finds it (courier_peek_v1): one statement, no second snapshot,
-- hence no race to run again. What a peek answers does not change: the first message
-- visible to the reader, in read order, as the statement's snapshot saw it. Pops are
-- taken as before.
CREATE FUNCTION courier_peek_v1(
    p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text)
RETURNS courier_messages
LANGUAGE plpgsql STABLE
-- A custom plan per call would cost more than the statement (migration 0035).
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_first courier_messages;
    v_hidden bigint[];  -- queues the reader may not read (a read by sender alone)
BEGIN
    IF p_sender_id IS NULL AND p_order = 'time' THEN
        SELECT c.* INTO v_first
        FROM (VALUES (0), (p_reader_id)) a(audience) CROSS JOIN LATERAL (
            SELECT m.* FROM courier_messages m
            WHERE m.queue_id = p_queue_id AND m.audience = a.audience
            ORDER BY m.created_at, m.id LIMIT 1) c
        ORDER BY c.created_at, c.id LIMIT 1;
    ELSIF p_sender_id IS NULL THEN
        SELECT c.* INTO v_first
        FROM (VALUES (0), (p_reader_id)) a(audience) CROSS JOIN LATERAL (
            SELECT m.* FROM courier_messages m
            WHERE m.queue_id = p_queue_id AND m.audience = a.audience
            ORDER BY m.priority DESC, m.created_at, m.id LIMIT 1) c
        ORDER BY c.priority DESC, c.created_at, c.id LIMIT 1;
    ELSIF p_queue_id IS NOT NULL AND p_order = 'time' THEN
        SELECT c.* INTO v_first
        FROM (VALUES (0), (p_reader_id)) a(audience) CROSS JOIN LATERAL (
            SELECT m.* FROM courier_messages m
            WHERE m.queue_id = p_queue_id AND m.sender_id = p_sender_id
              AND m.audience = a.audience
            ORDER BY m.created_at, m.id LIMIT 1) c
        ORDER BY c.created_at, c.id LIMIT 1;
    ELSIF p_queue_id IS NOT NULL THEN
        SELECT c.* INTO v_first
        FROM (VALUES (0), (p_reader_id)) a(audience) CROSS JOIN LATERAL (
            SELECT m.* FROM courier_messages m
            WHERE m.queue_id = p_queue_id AND m.sender_id = p_sender_id
              AND m.audience = a.audience
            ORDER BY m.priority DESC, m.created_at, m.id LIMIT 1) c
        ORDER BY c.priority DESC, c.created_at, c.id LIMIT 1;
    ELSE
        v_hidden := courier_unreadable_v1(p_reader_id);
        IF p_order = 'time' THEN
            SELECT c.* INTO v_first
            FROM (VALUES (0), (p_reader_id)) a(audience) CROSS JOIN LATERAL (
                SELECT m.* FROM courier_messages m
                WHERE m.sender_id = p_sender_id AND m.audience = a.audience
                  AND m.queue_id <> ALL (v_hidden)
                ORDER BY m.created_at, m.id LIMIT 1) c
            ORDER BY c.created_at, c.id LIMIT 1;
        ELSE
            SELECT c.* INTO v_first
            FROM (VALUES (0), (p_reader_id)) a(audience) CROSS JOIN LATERAL (
                SELECT m.* FROM courier_messages m
                WHERE m.sender_id = p_sender_id AND m.audience = a.audience
                  AND m.queue_id <> ALL (v_hidden)
                ORDER BY m.priority DESC, m.created_at, m.id LIMIT 1) c
            ORDER BY c.priority DESC, c.created_at, c.id LIMIT 1;
        END IF;
    END IF;
    RETURN v_first;
END;
$$;

CREATE OR REPLACE FUNCTION courier_read_v3(
    p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text,
    p_pop boolean, p_lease_ms integer, p_instance_id bigint,
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
    v_taken courier_messages%ROWTYPE;
    v_readers bigint[];  -- the queue's read list
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
    IF NOT coalesce(p_pop, false) THEN
        v_taken := courier_peek_v1(p_reader_id, p_queue_id, p_sender_id, p_order);
    ELSE
        IF p_sender_id IS NULL THEN
            v_id := courier_take_one_v1(p_reader_id, p_queue_id, p_order);
        ELSE
            v_id := courier_pick_v1(p_reader_id, p_queue_id, p_sender_id, p_order, true);
        END IF;
        IF v_id IS NOT NULL THEN
            DELETE FROM courier_messages m WHERE m.id = v_id RETURNING m.* INTO v_taken;
            IF NOT FOUND THEN  -- cannot happen while the pick holds the row lock
                PERFORM courier_fail_v1(16, format('message %s vanished while popped', v_id));
            END IF;
        END IF;
    END IF;
    IF v_taken.id IS NULL THEN
        -- The queue was found above (a delete since is read as after this read).
        status := CASE WHEN p_queue_id IS NULL THEN 4 ELSE 5 END;
        exec_ns := courier_elapsed_ns_v1(v_started);
        RETURN;
    END IF;
    status := 0;
    id := v_taken.id; queue_id := v_taken.queue_id; sender_id := v_taken.sender_id;
    receiver_id := v_taken.receiver_id; context := v_taken.context;
    priority := v_taken.priority; created_at := v_taken.created_at; body := v_taken.body;
    deliveries := v_taken.deliveries; dead_from := v_taken.dead_from;
    failure := v_taken.failure; properties := v_taken.properties;
    IF p_lease_ms > 0 THEN
        SELECT l.delivery_id, l.deliveries INTO delivery_id, deliveries
        FROM courier_lease_v1(v_taken, p_lease_ms, p_reader_id, p_instance_id) l;
    END IF;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- With few messages in the table the planner judged a custom plan of courier_pick_v1's
-- statements cheaper than the cached generic one and planned every call again: 0.3 ms
-- a call against 0.04 ms on the generic plan. Pops by sender still take it.
ALTER FUNCTION courier_pick_v1(bigint, bigint, bigint, text, boolean)
    SET plan_cache_mode = force_generic_plan;
