-- Migration 0014: messages carry properties, text keys to text values, stored as a
-- jsonb object (NULL: none). The helpers that move a message between tables carry
-- them (replaced in place, same signatures); the functions that take or return
-- messages get new versions beside the old ones, which go on working without.

ALTER TABLE courier_messages ADD COLUMN properties jsonb;
ALTER TABLE courier_held_messages ADD COLUMN properties jsonb;

CREATE OR REPLACE VIEW courier_console_messages_v1 AS
SELECT m.id,
       m.queue_id AS queue,
       q.name AS queue_name,
       m.sender_id AS sender,
       s.name AS sender_name,
       m.receiver_id AS receiver,
       r.name AS receiver_name,
       m.context,
       m.priority::integer AS priority,
       m.created_at,
       m.body,
       m.deliveries,
       m.dead_from,
       d.name AS dead_from_name,
       m.failure,
       m.properties
FROM courier_messages m
JOIN courier_queues q ON q.id = m.queue_id
LEFT JOIN courier_clients s ON s.id = m.sender_id
LEFT JOIN courier_clients r ON r.id = m.receiver_id
LEFT JOIN courier_queues d ON d.id = m.dead_from;

CREATE OR REPLACE FUNCTION courier_settle_v1(p_id bigint, p_delay_ms integer, p_failure text)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_held courier_held_messages%ROWTYPE;
    v_queue courier_queues%ROWTYPE;
    v_expired boolean;
BEGIN
    SELECT * INTO v_held FROM courier_held_messages h WHERE h.id = p_id;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT * INTO v_queue FROM courier_queues q WHERE q.id = v_held.queue_id;
    v_expired := coalesce(v_held.expires_at <= clock_timestamp(), false);
    IF v_expired OR (v_held.deliveries >= v_queue.max_deliveries
                     AND v_held.delivery_id IS NOT NULL) THEN
        DELETE FROM courier_held_messages h WHERE h.id = p_id;
        IF v_queue.dead_letter_queue_id IS NULL OR (v_expired AND NOT v_queue.dead_letter_expired)
        THEN
            RETURN 'dropped';
        END IF;
        INSERT INTO courier_messages
            (id, queue_id, sender_id, receiver_id, context, priority, created_at, body,
             deliveries, dead_from, failure, properties)
        OVERRIDING SYSTEM VALUE
        VALUES (v_held.id, v_queue.dead_letter_queue_id, v_held.sender_id, v_held.receiver_id,
                v_held.context, v_held.priority, v_held.created_at, v_held.body,
                v_held.deliveries, v_held.queue_id,
                CASE WHEN v_expired THEN 'expired'
                     ELSE coalesce(p_failure, v_held.failure) END, v_held.properties);
        RETURN 'dead';
    END IF;
    IF coalesce(p_delay_ms, 0) > 0 THEN
        UPDATE courier_held_messages h
        SET visible_at = clock_timestamp() + make_interval(secs => p_delay_ms / 1000.0),
            delivery_id = NULL, holder_id = NULL, instance_id = NULL,
            failure = coalesce(p_failure, h.failure)
        WHERE h.id = p_id;
        RETURN 'delayed';
    END IF;
    DELETE FROM courier_held_messages h WHERE h.id = p_id;
    INSERT INTO courier_messages
        (id, queue_id, sender_id, receiver_id, context, priority, created_at, body,
         deliveries, expires_at, dead_from, failure, properties)
    OVERRIDING SYSTEM VALUE
    VALUES (v_held.id, v_held.queue_id, v_held.sender_id, v_held.receiver_id, v_held.context,
            v_held.priority, v_held.created_at, v_held.body, v_held.deliveries,
            v_held.expires_at, v_held.dead_from, coalesce(p_failure, v_held.failure),
            v_held.properties);
    RETURN 'visible';
END;
$$;

CREATE OR REPLACE FUNCTION courier_lease_v1(
    p_message courier_messages, p_lease_ms integer, p_holder_id bigint, p_instance_id bigint,
    OUT delivery_id bigint, OUT deliveries integer)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    INSERT INTO courier_held_messages
        (id, queue_id, sender_id, receiver_id, context, priority, created_at, body,
         deliveries, expires_at, dead_from, failure, visible_at, delivery_id, holder_id,
         instance_id, properties)
    VALUES ((p_message).id, (p_message).queue_id, (p_message).sender_id,
            (p_message).receiver_id, (p_message).context, (p_message).priority,
            (p_message).created_at, (p_message).body, (p_message).deliveries + 1,
            (p_message).expires_at, (p_message).dead_from, (p_message).failure,
            clock_timestamp() + make_interval(secs => p_lease_ms / 1000.0),
            nextval('courier_delivery_ids'), p_holder_id, p_instance_id, (p_message).properties)
    RETURNING courier_held_messages.delivery_id, courier_held_messages.deliveries
    INTO delivery_id, deliveries;
END;
$$;

CREATE OR REPLACE FUNCTION courier_expire_v1(p_message courier_messages)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_queue courier_queues%ROWTYPE;
BEGIN
    DELETE FROM courier_messages m WHERE m.id = (p_message).id;
    SELECT * INTO v_queue FROM courier_queues q WHERE q.id = (p_message).queue_id;
    IF v_queue.dead_letter_queue_id IS NULL OR NOT v_queue.dead_letter_expired THEN
        RETURN 'dropped';
    END IF;
    INSERT INTO courier_messages
        (id, queue_id, sender_id, receiver_id, context, priority, created_at, body,
         deliveries, dead_from, failure, properties)
    OVERRIDING SYSTEM VALUE
    VALUES ((p_message).id, v_queue.dead_letter_queue_id, (p_message).sender_id,
            (p_message).receiver_id, (p_message).context, (p_message).priority,
            (p_message).created_at, (p_message).body, (p_message).deliveries,
            (p_message).queue_id, 'expired', (p_message).properties);
    RETURN 'dead';
END;
$$;

CREATE OR REPLACE FUNCTION courier_redrive_v1(
    p_queue_id bigint, p_message_ids bigint[], OUT moved integer, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    WITH taken AS (
        DELETE FROM courier_messages m
        WHERE m.id IN (
            SELECT d.id FROM courier_messages d
            WHERE d.queue_id = p_queue_id AND d.dead_from IS NOT NULL
              AND (p_message_ids IS NULL OR d.id = ANY (p_message_ids))
              AND EXISTS (SELECT FROM courier_queues q WHERE q.id = d.dead_from)
            FOR UPDATE SKIP LOCKED)
        RETURNING m.*
    ), returned AS (
        INSERT INTO courier_messages
            (id, queue_id, sender_id, receiver_id, context, priority, created_at, body,
             deliveries, expires_at, failure, properties)
        OVERRIDING SYSTEM VALUE
        SELECT t.id, t.dead_from, t.sender_id, t.receiver_id, t.context, t.priority,
               t.created_at, t.body, 0, NULL, t.failure, t.properties
        FROM taken t
        RETURNING 1
    )
    SELECT count(*) INTO moved FROM returned;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- courier_send_v2 with p_properties (a jsonb object, or NULL for none).
CREATE FUNCTION courier_send_v3(
    p_sender_id bigint, p_queue_ids bigint[], p_body bytea, p_receiver_id bigint,
    p_priority integer, p_context bigint, p_max_body_bytes integer,
    p_delay_ms integer, p_ttl_ms integer, p_dedup_id text, p_dedup_window_ms integer,
    p_properties jsonb, OUT message_ids bigint[], OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
    v_mode text;
    v_size integer := octet_length(p_body);
    v_found bigint;
    v_now timestamptz := clock_timestamp();
    v_limited bigint[];
BEGIN
    IF p_body IS NULL OR p_max_body_bytes IS NULL THEN
        PERFORM courier_fail_v1(10, 'a message needs a body and a size limit');
    END IF;
    IF v_size > p_max_body_bytes THEN
        PERFORM courier_fail_v1(12,
            format('message body is %s bytes; the limit is %s', v_size, p_max_body_bytes),
            json_build_object('size', v_size, 'limit', p_max_body_bytes)::text);
    END IF;
    IF p_priority IS NULL OR p_priority NOT BETWEEN 1 AND 10 THEN
        PERFORM courier_fail_v1(11, format('priority %s is not from 1 to 10', p_priority));
    END IF;
    IF p_receiver_id IS NOT NULL AND p_receiver_id <= 0 THEN
        PERFORM courier_fail_v1(10, 'a receiver is a positive client id');
    END IF;
    IF coalesce(cardinality(p_queue_ids), 0) = 0 THEN
        PERFORM courier_fail_v1(10, 'a message needs at least one queue');
    END IF;
    IF cardinality(p_queue_ids) <> (SELECT count(DISTINCT q) FROM unnest(p_queue_ids) q) THEN
        PERFORM courier_fail_v1(10, 'a queue is listed twice');
    END IF;
    IF p_delay_ms < 0 THEN
        PERFORM courier_fail_v1(10, format('delay %s ms is negative', p_delay_ms));
    END IF;
    IF p_ttl_ms <= 0 THEN
        PERFORM courier_fail_v1(10, format('ttl %s ms is not positive', p_ttl_ms));
    END IF;
    IF p_dedup_id IS NOT NULL AND length(p_dedup_id) NOT BETWEEN 1 AND 255 THEN
        PERFORM courier_fail_v1(10, 'a dedup id must be 1 to 255 characters');
    END IF;
    IF jsonb_typeof(p_properties) <> 'object' THEN
        PERFORM courier_fail_v1(10, 'properties are an object of text keys and values');
    END IF;
    SELECT c.mode INTO v_mode FROM courier_clients c WHERE c.id = p_sender_id;
    IF NOT FOUND THEN
        PERFORM courier_fail_v1(6, format('no client %s', p_sender_id));
    ELSIF v_mode <> 'read_write' THEN
        PERFORM courier_fail_v1(13, format('client %s is read-only', p_sender_id));
    END IF;
    IF p_dedup_id IS NOT NULL THEN
        -- A concurrent send with the same key waits here for this one to commit.
        INSERT INTO courier_dedup AS d (sender_id, dedup_id, message_ids, stored_at)
        VALUES (p_sender_id, p_dedup_id, '{}', v_now)
        ON CONFLICT (sender_id, dedup_id) DO UPDATE SET message_ids = '{}', stored_at = v_now
        WHERE d.stored_at < v_now - make_interval(secs => coalesce(p_dedup_window_ms, 0) / 1000.0);
        IF NOT FOUND THEN
            SELECT d.message_ids INTO message_ids FROM courier_dedup d
            WHERE d.sender_id = p_sender_id AND d.dedup_id = p_dedup_id;
            exec_ns := courier_elapsed_ns_v1(v_started);
            RETURN;
        END IF;
    END IF;
    -- Key-share locks keep the queues from being deleted before the insert; the same
    -- look finds the queues with a limit.
    SELECT count(*), array_agg(l.id ORDER BY l.id) FILTER (WHERE l.limited)
    INTO v_found, v_limited FROM (
        SELECT q.id, (q.max_messages IS NOT NULL OR q.max_bytes IS NOT NULL) AS limited
        FROM courier_queues q WHERE q.id = ANY (p_queue_ids) FOR KEY SHARE
    ) l;
    IF v_found <> cardinality(p_queue_ids) THEN
        PERFORM courier_fail_v1(1, format('queue %s does not exist', (
            SELECT string_agg(w.id::text, ', ') FROM unnest(p_queue_ids) w(id)
            WHERE NOT EXISTS (SELECT 1 FROM courier_queues q WHERE q.id = w.id))));
    END IF;
    IF v_limited IS NOT NULL THEN
        PERFORM courier_lock_limited_v1(v_limited);
        PERFORM courier_check_room_v1(v_limited, v_size);
    END IF;
    SELECT array_agg(nextval('courier_messages_id_seq') ORDER BY w.ord) INTO message_ids
    FROM unnest(p_queue_ids) WITH ORDINALITY AS w(queue_id, ord);
    IF coalesce(p_delay_ms, 0) > 0 THEN
        INSERT INTO courier_held_messages
            (id, queue_id, sender_id, receiver_id, context, priority, created_at, body,
             deliveries, expires_at, visible_at, properties)
        SELECT message_ids[w.ord], w.queue_id, p_sender_id, p_receiver_id, p_context,
               p_priority, v_now, p_body, 0,
               v_now + make_interval(secs => p_ttl_ms / 1000.0),
               v_now + make_interval(secs => p_delay_ms / 1000.0), p_properties
        FROM unnest(p_queue_ids) WITH ORDINALITY AS w(queue_id, ord);
    ELSE
        INSERT INTO courier_messages
            (id, queue_id, sender_id, receiver_id, context, priority, created_at, body,
             expires_at, properties)
        OVERRIDING SYSTEM VALUE
        SELECT message_ids[w.ord], w.queue_id, p_sender_id, p_receiver_id, p_context,
               p_priority, v_now, p_body, v_now + make_interval(secs => p_ttl_ms / 1000.0),
               p_properties
        FROM unnest(p_queue_ids) WITH ORDINALITY AS w(queue_id, ord)
        ORDER BY w.ord;
    END IF;
    IF v_limited IS NOT NULL THEN
        PERFORM courier_trim_v1(v_limited);
    END IF;
    IF p_dedup_id IS NOT NULL THEN
        UPDATE courier_dedup d SET message_ids = courier_send_v3.message_ids
        WHERE d.sender_id = p_sender_id AND d.dedup_id = p_dedup_id;
    END IF;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- courier_read_v2, answering with the message's properties too.
CREATE FUNCTION courier_read_v3(
    p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text, p_pop boolean,
    p_lease_ms integer, p_instance_id bigint,
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
    FOR v_attempt IN 1..100 LOOP
        IF p_pop AND p_sender_id IS NULL THEN
            v_id := courier_take_one_v1(p_reader_id, p_queue_id, p_order);
        ELSE
            v_id := courier_pick_v1(
                p_reader_id, p_queue_id, p_sender_id, p_order, coalesce(p_pop, false));
        END IF;
        IF v_id IS NULL THEN
            IF p_queue_id IS NULL THEN
                status := 4;
            ELSIF EXISTS (SELECT 1 FROM courier_queues q WHERE q.id = p_queue_id) THEN
                status := 5;
            ELSE
                PERFORM courier_fail_v1(1, format('queue %s does not exist', p_queue_id));
            END IF;
            EXIT;
        ELSIF p_pop THEN
            DELETE FROM courier_messages m WHERE m.id = v_id RETURNING m.* INTO v_taken;
            IF NOT FOUND THEN  -- cannot happen while the pick holds the row lock
                PERFORM courier_fail_v1(16, format('message %s vanished while popped', v_id));
            END IF;
        ELSE
            SELECT m.* INTO v_taken FROM courier_messages m WHERE m.id = v_id;
            CONTINUE WHEN NOT FOUND;  -- a pop took the picked message: pick again
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
        EXIT;
    END LOOP;
    IF status IS NULL THEN  -- every peek lost its race
        PERFORM courier_fail_v1(16, 'a peek lost 100 races in a row to concurrent pops');
    END IF;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- courier_pop_response_v2, answering with the message's properties too.
CREATE FUNCTION courier_pop_response_v3(
    p_reader_id bigint, p_queue_id bigint, p_context bigint,
    OUT status smallint, OUT id bigint, OUT queue_id bigint, OUT sender_id bigint,
    OUT receiver_id bigint, OUT context bigint, OUT priority smallint,
    OUT created_at timestamptz, OUT body bytea, OUT deliveries integer,
    OUT delivery_id bigint, OUT dead_from bigint, OUT failure text, OUT properties jsonb,
    OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    DELETE FROM courier_messages m WHERE m.id = (
        SELECT r.id FROM courier_messages r
        WHERE r.queue_id = p_queue_id AND r.receiver_id = p_reader_id AND r.context = p_context
        ORDER BY r.created_at, r.id LIMIT 1 FOR UPDATE SKIP LOCKED)
    RETURNING 0, m.id, m.queue_id, m.sender_id, m.receiver_id, m.context, m.priority,
              m.created_at, m.body, m.deliveries, m.dead_from, m.failure, m.properties
    INTO status, id, queue_id, sender_id, receiver_id, context, priority, created_at, body,
         deliveries, dead_from, failure, properties;
    IF NOT FOUND THEN
        IF NOT EXISTS (SELECT 1 FROM courier_queues q WHERE q.id = p_queue_id) THEN
            PERFORM courier_fail_v1(1, format('queue %s does not exist', p_queue_id));
        END IF;
        status := 4;
    END IF;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- courier_restore_v1 with the popped message's properties.
CREATE FUNCTION courier_restore_v2(
    p_id bigint, p_queue_id bigint, p_sender_id bigint, p_receiver_id bigint,
    p_context bigint, p_priority integer, p_created_at timestamptz, p_body bytea,
    p_deliveries integer, p_dead_from bigint, p_failure text, p_properties jsonb,
    OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    INSERT INTO courier_messages
        (id, queue_id, sender_id, receiver_id, context, priority, created_at, body,
         deliveries, dead_from, failure, properties)
    OVERRIDING SYSTEM VALUE
    SELECT p_id, q.id, p_sender_id, p_receiver_id, p_context, p_priority, p_created_at,
           p_body, p_deliveries, p_dead_from, p_failure, p_properties
    FROM courier_queues q WHERE q.id = p_queue_id FOR KEY SHARE
    ON CONFLICT (id) DO NOTHING;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- courier_pop_batch_v2, answering with each message's properties too.
CREATE FUNCTION courier_pop_batch_v3(p_queue_id bigint, p_order text, p_readers bigint[])
RETURNS TABLE (request integer, status smallint, message text, id bigint, queue_id bigint,
               sender_id bigint, receiver_id bigint, context bigint, priority smallint,
               created_at timestamptz, body bytea, deliveries integer, delivery_id bigint,
               dead_from bigint, failure text, properties jsonb, exec_ns bigint)
LANGUAGE plpgsql
-- Plan once: custom plans of these statements cost more than running them.
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
    v_with_own bigint[];   -- readers holding messages of their own here
    v_shared integer[];    -- requests served by the shared walk, in order
    v_next integer := 1;   -- the next of them to answer
    v_id bigint;
    v_row record;
BEGIN
    IF p_order IS NULL OR p_order NOT IN ('time', 'priority') THEN
        RETURN QUERY SELECT r.n::integer, 10::smallint, 'order must be time or priority',
            NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,
            NULL::smallint, NULL::timestamptz, NULL::bytea, NULL::integer, NULL::bigint,
            NULL::bigint, NULL::text, NULL::jsonb, 0::bigint
        FROM generate_subscripts(p_readers, 1) r(n);
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT FROM courier_queues q WHERE q.id = p_queue_id) THEN
        RETURN QUERY SELECT r.n::integer, 1::smallint,
            format('queue %s does not exist', p_queue_id),
            NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,
            NULL::smallint, NULL::timestamptz, NULL::bytea, NULL::integer, NULL::bigint,
            NULL::bigint, NULL::text, NULL::jsonb, 0::bigint
        FROM generate_subscripts(p_readers, 1) r(n);
        RETURN;
    END IF;
    SELECT array_agg(DISTINCT r.reader) INTO v_with_own FROM unnest(p_readers) r(reader)
    WHERE EXISTS (SELECT FROM courier_messages m
                  WHERE m.queue_id = p_queue_id AND m.audience = r.reader);
    SELECT array_agg(r.n ORDER BY r.n) INTO v_shared
    FROM unnest(p_readers) WITH ORDINALITY r(reader, n)
    WHERE NOT r.reader = ANY (coalesce(v_with_own, '{}'));

    status := 0;
    message := NULL;
    FOR v_row IN
        WITH picked AS (
            SELECT m.id FROM courier_messages m
            WHERE m.queue_id = p_queue_id AND m.audience = 0 AND p_order = 'time'
            ORDER BY m.created_at, m.id LIMIT coalesce(cardinality(v_shared), 0)
            FOR UPDATE SKIP LOCKED
        ), picked_by_priority AS (
            SELECT m.id FROM courier_messages m
            WHERE m.queue_id = p_queue_id AND m.audience = 0 AND p_order = 'priority'
            ORDER BY m.priority DESC, m.created_at, m.id
            LIMIT coalesce(cardinality(v_shared), 0)
            FOR UPDATE SKIP LOCKED
        ), taken AS (
            DELETE FROM courier_messages m
            WHERE m.id IN (SELECT p.id FROM picked p UNION ALL SELECT p.id FROM picked_by_priority p)
            RETURNING m.*
        )
        SELECT * FROM taken t
        ORDER BY CASE WHEN p_order = 'priority' THEN -t.priority ELSE 0 END, t.created_at, t.id
    LOOP
        request := v_shared[v_next];
        v_next := v_next + 1;
        id := v_row.id; queue_id := v_row.queue_id; sender_id := v_row.sender_id;
        receiver_id := v_row.receiver_id; context := v_row.context;
        priority := v_row.priority; created_at := v_row.created_at; body := v_row.body;
        deliveries := v_row.deliveries; dead_from := v_row.dead_from; failure := v_row.failure;
        properties := v_row.properties;
        exec_ns := courier_elapsed_ns_v1(v_started);
        RETURN NEXT;
    END LOOP;

    FOR v_row IN SELECT r.reader, r.n::integer AS n
                 FROM unnest(p_readers) WITH ORDINALITY r(reader, n) ORDER BY r.n LOOP
        IF v_row.n = ANY (coalesce(v_shared, '{}')) THEN
            CONTINUE;
        END IF;
        v_id := courier_take_one_v1(v_row.reader, p_queue_id, p_order);
        IF v_id IS NOT NULL THEN
            DELETE FROM courier_messages m WHERE m.id = v_id
            RETURNING v_row.n, 0, NULL, m.id, m.queue_id, m.sender_id, m.receiver_id,
                      m.context, m.priority, m.created_at, m.body, m.deliveries, m.dead_from,
                      m.failure, m.properties
            INTO request, status, message, id, queue_id, sender_id, receiver_id, context,
                 priority, created_at, body, deliveries, dead_from, failure, properties;
            exec_ns := courier_elapsed_ns_v1(v_started);
            RETURN NEXT;
        ELSE
            v_shared := v_shared || v_row.n;  -- answered empty below
        END IF;
    END LOOP;

    status := 5;
    message := NULL;
    id := NULL; queue_id := NULL; sender_id := NULL; receiver_id := NULL; context := NULL;
    priority := NULL; created_at := NULL; body := NULL; deliveries := NULL;
    dead_from := NULL; failure := NULL; properties := NULL;
    FOR v_i IN v_next..coalesce(cardinality(v_shared), 0) LOOP
        request := v_shared[v_i];
        exec_ns := courier_elapsed_ns_v1(v_started);
        RETURN NEXT;
    END LOOP;
END;
$$;

-- courier_pop_many_v1, answering with each message's properties too.
CREATE FUNCTION courier_pop_many_v2(
    p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text,
    p_count integer, p_lease_ms integer, p_instance_id bigint)
RETURNS TABLE (id bigint, queue_id bigint, sender_id bigint, receiver_id bigint,
               context bigint, priority smallint, created_at timestamptz, body bytea,
               deliveries integer, delivery_id bigint, dead_from bigint, failure text,
               properties jsonb, exec_ns bigint)
LANGUAGE plpgsql
-- Plan once: custom plans of these statements cost more than running them.
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
    v_row record;
BEGIN
    IF p_count IS NULL OR p_count < 1 THEN
        PERFORM courier_fail_v1(10, 'a batch read takes at least one message');
    END IF;
    IF p_queue_id IS NULL THEN
        PERFORM courier_fail_v1(10, 'a batch read needs a queue');
    END IF;
    IF p_order IS NULL OR p_order NOT IN ('time', 'priority') THEN
        PERFORM courier_fail_v1(10, 'order must be time or priority');
    END IF;
    IF p_sender_id IS NULL AND coalesce(p_lease_ms, 0) = 0 THEN
        IF NOT EXISTS (SELECT FROM courier_queues q WHERE q.id = p_queue_id) THEN
            PERFORM courier_fail_v1(1, format('queue %s does not exist', p_queue_id));
        END IF;
        -- In index order with a limit: a generic plan of a bare EXISTS may scan the
        -- whole table, taking most rows for the reader's.
        PERFORM FROM courier_messages m
        WHERE m.queue_id = p_queue_id AND m.audience = p_reader_id
        ORDER BY m.created_at, m.id LIMIT 1;
        IF FOUND THEN
            -- Messages of its own compete with the shared ones: one by one.
            RETURN QUERY
            SELECT p.id, p.queue_id, p.sender_id, p.receiver_id, p.context, p.priority,
                   p.created_at, p.body, p.deliveries, p.delivery_id, p.dead_from, p.failure,
                   p.properties, p.exec_ns
            FROM courier_pop_batch_v3(p_queue_id, p_order,
                                      array_fill(p_reader_id, ARRAY[p_count])) p
            WHERE p.status = 0;
        ELSIF p_order = 'time' THEN
            -- One walk of the index, skipping rows other pops hold.
            RETURN QUERY
            WITH taken AS (
                -- An array, not IN (...): a generic plan of IN may hash-join a scan
                -- of the whole table against the few ids.
                DELETE FROM courier_messages m WHERE m.id = ANY (ARRAY(
                    SELECT w.id FROM courier_messages w
                    WHERE w.queue_id = p_queue_id AND w.audience = 0
                    ORDER BY w.created_at, w.id LIMIT p_count FOR UPDATE SKIP LOCKED))
                RETURNING m.*
            )
            SELECT t.id, t.queue_id, t.sender_id, t.receiver_id, t.context, t.priority,
                   t.created_at, t.body, t.deliveries, NULL::bigint, t.dead_from, t.failure,
                   t.properties, courier_elapsed_ns_v1(v_started)
            FROM taken t ORDER BY t.created_at, t.id;
        ELSE
            RETURN QUERY
            WITH taken AS (
                DELETE FROM courier_messages m WHERE m.id = ANY (ARRAY(
                    SELECT w.id FROM courier_messages w
                    WHERE w.queue_id = p_queue_id AND w.audience = 0
                    ORDER BY w.priority DESC, w.created_at, w.id LIMIT p_count
                    FOR UPDATE SKIP LOCKED))
                RETURNING m.*
            )
            SELECT t.id, t.queue_id, t.sender_id, t.receiver_id, t.context, t.priority,
                   t.created_at, t.body, t.deliveries, NULL::bigint, t.dead_from, t.failure,
                   t.properties, courier_elapsed_ns_v1(v_started)
            FROM taken t ORDER BY t.priority DESC, t.created_at, t.id;
        END IF;
        RETURN;
    END IF;
    FOR v_i IN 1..p_count LOOP
        SELECT * INTO v_row FROM courier_read_v3(p_reader_id, p_queue_id, p_sender_id, p_order,
                                                 true, coalesce(p_lease_ms, 0), p_instance_id);
        EXIT WHEN v_row.status <> 0;
        id := v_row.id; queue_id := v_row.queue_id; sender_id := v_row.sender_id;
        receiver_id := v_row.receiver_id; context := v_row.context;
        priority := v_row.priority; created_at := v_row.created_at; body := v_row.body;
        deliveries := v_row.deliveries; delivery_id := v_row.delivery_id;
        dead_from := v_row.dead_from; failure := v_row.failure;
        properties := v_row.properties;
        exec_ns := courier_elapsed_ns_v1(v_started);
        RETURN NEXT;
    END LOOP;
END;
$$;

-- A batch stored one message at a time (courier_send_v3), all or none: the first
-- bad message fails the batch, naming its number.
CREATE FUNCTION courier_send_each_v1(
    p_sender_id bigint, p_queue_ids bigint[], p_bodies bytea[], p_receivers bigint[],
    p_priorities integer[], p_contexts bigint[], p_delays integer[], p_ttls integer[],
    p_dedup_ids text[], p_properties jsonb[], p_max_body_bytes integer,
    p_dedup_window_ms integer, p_started timestamptz)
RETURNS TABLE (message_ids bigint[], exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_k integer := 0;
    v_detail text;
BEGIN
    BEGIN
        FOR v_i IN 1..cardinality(p_bodies) LOOP
            v_k := v_i;
            RETURN QUERY
            SELECT s.message_ids, courier_elapsed_ns_v1(p_started)
            FROM courier_send_v3(p_sender_id, p_queue_ids, p_bodies[v_i], p_receivers[v_i],
                                 p_priorities[v_i], p_contexts[v_i], p_max_body_bytes,
                                 coalesce(p_delays[v_i], 0), p_ttls[v_i], p_dedup_ids[v_i],
                                 p_dedup_window_ms, p_properties[v_i]) s;
        END LOOP;
    EXCEPTION WHEN OTHERS THEN
        IF SQLSTATE NOT LIKE 'CQ%' THEN
            RAISE;
        END IF;
        GET STACKED DIAGNOSTICS v_detail = PG_EXCEPTION_DETAIL;
        RAISE EXCEPTION USING ERRCODE = SQLSTATE, DETAIL = v_detail,
            MESSAGE = format('message %s of the batch: %s', v_k, SQLERRM);
    END;
END;
$$;

-- courier_send_many_v1 with p_properties, one per message (NULL: none). A plain
-- batch with properties is still stored in one statement; one with options, or one
-- that needs the general path, goes through courier_send_each_v1.
CREATE FUNCTION courier_send_many_v2(
    p_sender_id bigint, p_queue_ids bigint[], p_bodies bytea[], p_receivers bigint[],
    p_priorities integer[], p_contexts bigint[], p_delays integer[], p_ttls integer[],
    p_dedup_ids text[], p_properties jsonb[], p_max_body_bytes integer,
    p_dedup_window_ms integer)
RETURNS TABLE (message_ids bigint[], exec_ns bigint)
LANGUAGE plpgsql
-- Plan once: custom plans of these statements cost more than running them.
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
    v_count integer := coalesce(cardinality(p_bodies), 0);
    v_found bigint;
    v_limited boolean;
    v_mode text;
    v_k integer;
    v_with_properties boolean := false;
BEGIN
    IF v_count = 0 THEN
        PERFORM courier_fail_v1(10, 'a batch needs at least one message');
    END IF;
    IF coalesce(cardinality(p_receivers), 0) <> v_count
       OR coalesce(cardinality(p_priorities), 0) <> v_count
       OR coalesce(cardinality(p_contexts), 0) <> v_count
       OR coalesce(cardinality(p_delays), 0) <> v_count
       OR coalesce(cardinality(p_ttls), 0) <> v_count
       OR coalesce(cardinality(p_dedup_ids), 0) <> v_count
       OR coalesce(cardinality(p_properties), 0) <> v_count THEN
        PERFORM courier_fail_v1(10, 'every field of a batch has one value per message');
    END IF;
    IF EXISTS (SELECT FROM generate_subscripts(p_bodies, 1) k
               WHERE coalesce(p_delays[k], 0) <> 0 OR p_ttls[k] IS NOT NULL
                     OR p_dedup_ids[k] IS NOT NULL) THEN
        RETURN QUERY SELECT * FROM courier_send_each_v1(
            p_sender_id, p_queue_ids, p_bodies, p_receivers, p_priorities, p_contexts, p_delays,
            p_ttls, p_dedup_ids, p_properties, p_max_body_bytes, p_dedup_window_ms, v_started);
        RETURN;
    END IF;
    -- Properties ride along on the one-statement path; a batch with properties that
    -- needs the general path goes one message at a time, as one with options does.
    v_with_properties := EXISTS (SELECT FROM unnest(p_properties) p WHERE p IS NOT NULL);
    IF coalesce(cardinality(p_queue_ids), 0) = 0 THEN
        PERFORM courier_fail_v1(10, 'message 1 of the batch: a message needs at least one queue');
    END IF;
    -- Key-share locks keep the queues from being deleted before the insert; a queue
    -- with a limit takes the general path, which counts its room.
    SELECT count(*), bool_or(q.max_messages IS NOT NULL OR q.max_bytes IS NOT NULL)
    INTO v_found, v_limited
    FROM (SELECT q.max_messages, q.max_bytes FROM courier_queues q
          WHERE q.id = ANY (p_queue_ids) FOR KEY SHARE) q;
    IF v_limited OR v_found < cardinality(p_queue_ids) THEN
        IF v_with_properties THEN
            RETURN QUERY SELECT * FROM courier_send_each_v1(
                p_sender_id, p_queue_ids, p_bodies, p_receivers, p_priorities, p_contexts, p_delays,
                p_ttls, p_dedup_ids, p_properties, p_max_body_bytes, p_dedup_window_ms, v_started);
        ELSE
            RETURN QUERY SELECT * FROM courier_send_many_checked_v1(
                p_sender_id, p_queue_ids, p_bodies, p_receivers, p_priorities, p_contexts,
                p_max_body_bytes, v_started);
        END IF;
        RETURN;
    END IF;
    SELECT c.mode INTO v_mode FROM courier_clients c WHERE c.id = p_sender_id;
    IF v_mode IS DISTINCT FROM 'read_write' OR v_found <> (
            SELECT count(DISTINCT q) FROM unnest(p_queue_ids) q) THEN
        IF v_with_properties THEN
            RETURN QUERY SELECT * FROM courier_send_each_v1(
                p_sender_id, p_queue_ids, p_bodies, p_receivers, p_priorities, p_contexts, p_delays,
                p_ttls, p_dedup_ids, p_properties, p_max_body_bytes, p_dedup_window_ms, v_started);
        ELSE
            RETURN QUERY SELECT * FROM courier_send_many_checked_v1(
                p_sender_id, p_queue_ids, p_bodies, p_receivers, p_priorities, p_contexts,
                p_max_body_bytes, v_started);
        END IF;
        RETURN;
    END IF;
    SELECT min(m.n) INTO v_k FROM unnest(p_bodies, p_receivers, p_priorities, p_properties)
        WITH ORDINALITY m(body, receiver, priority, properties, n)
    WHERE m.body IS NULL OR octet_length(m.body) > p_max_body_bytes
       OR m.priority IS NULL OR m.priority NOT BETWEEN 1 AND 10 OR m.receiver <= 0
       OR jsonb_typeof(m.properties) <> 'object';
    IF v_k IS NOT NULL THEN  -- the general path names what is wrong with it
        IF v_with_properties THEN
            RETURN QUERY SELECT * FROM courier_send_each_v1(
                p_sender_id, p_queue_ids, p_bodies, p_receivers, p_priorities, p_contexts, p_delays,
                p_ttls, p_dedup_ids, p_properties, p_max_body_bytes, p_dedup_window_ms, v_started);
        ELSE
            RETURN QUERY SELECT * FROM courier_send_many_checked_v1(
                p_sender_id, p_queue_ids, p_bodies, p_receivers, p_priorities, p_contexts,
                p_max_body_bytes, v_started);
        END IF;
        RETURN;
    END IF;
    -- Every check passed once for the whole batch: store it in one statement. Ids are
    -- drawn in copy order, so the batch keeps its order in time.
    RETURN QUERY
    WITH drawn AS (
        SELECT m.n, q.ord, q.queue_id, m.receiver, m.context, m.priority, m.body,
               m.properties, nextval('courier_messages_id_seq') AS id
        FROM unnest(p_bodies, p_receivers, p_priorities, p_contexts, p_properties)
                 WITH ORDINALITY m(body, receiver, priority, context, properties, n)
        CROSS JOIN unnest(p_queue_ids) WITH ORDINALITY q(queue_id, ord)
        ORDER BY m.n, q.ord
    ), stored AS (
        INSERT INTO courier_messages
            (id, queue_id, sender_id, receiver_id, context, priority, body, properties)
        OVERRIDING SYSTEM VALUE
        SELECT d.id, d.queue_id, p_sender_id, d.receiver, d.context, d.priority, d.body,
               d.properties
        FROM drawn d ORDER BY d.n, d.ord
        RETURNING id
    )
    -- Joined to what was stored, so the insert has run when exec_ns is taken.
    SELECT array_agg(d.id ORDER BY d.ord), courier_elapsed_ns_v1(v_started)
    FROM drawn d JOIN stored s ON s.id = d.id GROUP BY d.n ORDER BY d.n;
END;
$$;

-- One send with options or properties, as courier_send_v3 takes it; request is the
-- caller's number.
CREATE TYPE courier_option_send_v2 AS (
    request integer, sender_id bigint, queue_ids bigint[], body bytea, receiver_id bigint,
    priority integer, context bigint, delay_ms integer, ttl_ms integer, dedup_id text,
    properties jsonb);

-- A batch send as courier_send_many_v2 takes it.
CREATE TYPE courier_send_group_v2 AS (
    request integer, sender_id bigint, queue_ids bigint[], bodies bytea[],
    receivers bigint[], priorities integer[], contexts bigint[], delays integer[],
    ttls integer[], dedup_ids text[], properties jsonb[]);

-- courier_exchange_v4 with properties: every message read comes with its properties,
-- and sends with options or properties go one by one (courier_send_v3), batch sends
-- through courier_send_many_v2. The same order: acks and plain sends (set-based, as
-- in courier_exchange_v2), option sends, batch sends, pops by queue, other reads,
-- batch reads. A caller with only acks and plain sends may keep calling
-- courier_exchange_v2, which answers them alike.
CREATE FUNCTION courier_exchange_v5(
    p_send_requests integer[], p_senders bigint[], p_bodies bytea[], p_receivers bigint[],
    p_priorities integer[], p_contexts bigint[], p_copy_sends integer[], p_copy_queues bigint[],
    p_max_body_bytes integer,
    p_pop_requests integer[], p_pop_queues bigint[], p_pop_orders text[], p_pop_readers bigint[],
    p_read_requests integer[], p_read_readers bigint[], p_read_queues bigint[],
    p_read_senders bigint[], p_read_orders text[], p_read_pops boolean[],
    p_read_leases integer[], p_read_instances bigint[],
    p_ack_requests integer[], p_ack_holders bigint[], p_ack_deliveries bigint[],
    p_option_sends courier_option_send_v2[], p_dedup_window_ms integer,
    p_send_groups courier_send_group_v2[], p_pop_groups courier_pop_group_v1[])
RETURNS TABLE (request integer, status smallint, message text, message_ids bigint[], id bigint,
               queue_id bigint, sender_id bigint, receiver_id bigint, context bigint,
               priority smallint, created_at timestamptz, body bytea, deliveries integer,
               delivery_id bigint, dead_from bigint, failure text, properties jsonb,
               exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
    v_pops integer := coalesce(cardinality(p_pop_requests), 0);
    v_first integer := 1;  -- where the current group of pops starts
    v_send courier_option_send_v2;
    v_group courier_send_group_v2;
    v_pop courier_pop_group_v1;
BEGIN
    IF cardinality(p_ack_requests) > 0 THEN
        -- Each delivery is deleted by the first ack for it that its holder sent.
        RETURN QUERY
        WITH wanted AS (
            SELECT a.n, a.holder, a.delivery
            FROM unnest(p_ack_requests, p_ack_holders, p_ack_deliveries) a(n, holder, delivery)
        ), acked AS (
            DELETE FROM courier_held_messages h
            USING (SELECT DISTINCT ON (f.delivery, f.holder) f.n, f.delivery, f.holder
                   FROM wanted f ORDER BY f.delivery, f.holder, f.n) w
            WHERE h.delivery_id = w.delivery AND h.holder_id = w.holder
            RETURNING w.n
        )
        SELECT w.n, CASE WHEN a.n IS NULL THEN 17 ELSE 0 END::smallint,
               CASE WHEN a.n IS NULL THEN format('delivery %s is not held: its lease ran out,'
                                                 ' or it was acknowledged or released', w.delivery)
               END,
               NULL::bigint[], NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,
               NULL::bigint, NULL::smallint, NULL::timestamptz, NULL::bytea, NULL::integer,
               NULL::bigint, NULL::bigint, NULL::text, NULL::jsonb,
               courier_elapsed_ns_v1(v_started)
        FROM wanted w LEFT JOIN acked a ON a.n = w.n;
    END IF;
    IF cardinality(p_send_requests) > 0 THEN
        RETURN QUERY
        SELECT p_send_requests[s.request], s.status, s.message, s.message_ids, NULL::bigint,
               NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::smallint,
               NULL::timestamptz, NULL::bytea, NULL::integer, NULL::bigint, NULL::bigint,
               NULL::text, NULL::jsonb, s.exec_ns
        FROM courier_send_batch_v2(p_senders, p_bodies, p_receivers, p_priorities, p_contexts,
                                   p_copy_sends, p_copy_queues, p_max_body_bytes) s;
    END IF;
    FOREACH v_send IN ARRAY coalesce(p_option_sends, '{}') LOOP
        BEGIN
            RETURN QUERY
            SELECT v_send.request, 0::smallint, NULL::text, s.message_ids, NULL::bigint,
                   NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::smallint,
                   NULL::timestamptz, NULL::bytea, NULL::integer, NULL::bigint,
                   NULL::bigint, NULL::text, NULL::jsonb, s.exec_ns
            FROM courier_send_v3(v_send.sender_id, v_send.queue_ids, v_send.body,
                                 v_send.receiver_id, v_send.priority, v_send.context,
                                 p_max_body_bytes, v_send.delay_ms, v_send.ttl_ms,
                                 v_send.dedup_id, p_dedup_window_ms, v_send.properties) s;
        EXCEPTION WHEN OTHERS THEN
            IF SQLSTATE NOT LIKE 'CQ%' THEN
                RAISE;
            END IF;
            RETURN QUERY
            SELECT v_send.request, substr(SQLSTATE, 3)::smallint, SQLERRM, NULL::bigint[],
                   NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,
                   NULL::smallint, NULL::timestamptz, NULL::bytea, NULL::integer,
                   NULL::bigint, NULL::bigint, NULL::text, NULL::jsonb, 0::bigint;
        END;
    END LOOP;
    FOREACH v_group IN ARRAY coalesce(p_send_groups, '{}') LOOP
        BEGIN
            RETURN QUERY
            SELECT v_group.request, 0::smallint, NULL::text, s.message_ids, NULL::bigint,
                   NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::smallint,
                   NULL::timestamptz, NULL::bytea, NULL::integer, NULL::bigint,
                   NULL::bigint, NULL::text, NULL::jsonb, s.exec_ns
            FROM courier_send_many_v2(v_group.sender_id, v_group.queue_ids, v_group.bodies,
                                      v_group.receivers, v_group.priorities, v_group.contexts,
                                      v_group.delays, v_group.ttls, v_group.dedup_ids,
                                      v_group.properties, p_max_body_bytes,
                                      p_dedup_window_ms) s;
        EXCEPTION WHEN OTHERS THEN
            IF SQLSTATE NOT LIKE 'CQ%' THEN
                RAISE;
            END IF;
            RETURN QUERY
            SELECT v_group.request, substr(SQLSTATE, 3)::smallint, SQLERRM, NULL::bigint[],
                   NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,
                   NULL::smallint, NULL::timestamptz, NULL::bytea, NULL::integer,
                   NULL::bigint, NULL::bigint, NULL::text, NULL::jsonb, 0::bigint;
        END;
    END LOOP;
    FOR v_last IN 1..v_pops LOOP
        CONTINUE WHEN v_last < v_pops AND p_pop_queues[v_last + 1] = p_pop_queues[v_last]
                      AND p_pop_orders[v_last + 1] = p_pop_orders[v_last];
        RETURN QUERY
        SELECT p_pop_requests[v_first - 1 + p.request], p.status, p.message, NULL::bigint[],
               p.id, p.queue_id, p.sender_id, p.receiver_id, p.context, p.priority,
               p.created_at, p.body, p.deliveries, p.delivery_id, p.dead_from, p.failure,
               p.properties, p.exec_ns
        FROM courier_pop_batch_v3(p_pop_queues[v_last], p_pop_orders[v_last],
                                  p_pop_readers[v_first:v_last]) p;
        v_first := v_last + 1;
    END LOOP;
    FOR v_i IN 1..coalesce(cardinality(p_read_requests), 0) LOOP
        BEGIN
            RETURN QUERY
            SELECT p_read_requests[v_i], r.status, NULL::text, NULL::bigint[], r.id,
                   r.queue_id, r.sender_id, r.receiver_id, r.context, r.priority,
                   r.created_at, r.body, r.deliveries, r.delivery_id, r.dead_from, r.failure,
                   r.properties, r.exec_ns
            FROM courier_read_v3(p_read_readers[v_i], p_read_queues[v_i], p_read_senders[v_i],
                                 p_read_orders[v_i], p_read_pops[v_i],
                                 coalesce(p_read_leases[v_i], 0), p_read_instances[v_i]) r;
        EXCEPTION WHEN OTHERS THEN
            IF SQLSTATE NOT LIKE 'CQ%' THEN
                RAISE;
            END IF;
            RETURN QUERY
            SELECT p_read_requests[v_i], substr(SQLSTATE, 3)::smallint, SQLERRM,
                   NULL::bigint[], NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,
                   NULL::bigint, NULL::smallint, NULL::timestamptz, NULL::bytea,
                   NULL::integer, NULL::bigint, NULL::bigint, NULL::text, NULL::jsonb,
                   0::bigint;
        END;
    END LOOP;
    FOREACH v_pop IN ARRAY coalesce(p_pop_groups, '{}') LOOP
        BEGIN
            RETURN QUERY
            SELECT v_pop.request, 0::smallint, NULL::text, NULL::bigint[], p.id, p.queue_id,
                   p.sender_id, p.receiver_id, p.context, p.priority, p.created_at, p.body,
                   p.deliveries, p.delivery_id, p.dead_from, p.failure, p.properties,
                   p.exec_ns
            FROM courier_pop_many_v2(v_pop.reader_id, v_pop.queue_id, v_pop.sender_id,
                                     v_pop.read_order, v_pop.count, v_pop.lease_ms,
                                     v_pop.instance_id) p;
        EXCEPTION WHEN OTHERS THEN
            IF SQLSTATE NOT LIKE 'CQ%' THEN
                RAISE;
            END IF;
            RETURN QUERY
            SELECT v_pop.request, substr(SQLSTATE, 3)::smallint, SQLERRM, NULL::bigint[],
                   NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,
                   NULL::smallint, NULL::timestamptz, NULL::bytea, NULL::integer,
                   NULL::bigint, NULL::bigint, NULL::text, NULL::jsonb, 0::bigint;
        END;
    END LOOP;
END;
$$;
