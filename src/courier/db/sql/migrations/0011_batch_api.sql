-- Migration 0011: one request carries many messages. courier_send_many_v1 stores a
-- batch in the same queues all or none; courier_pop_many_v1 takes up to so many
-- messages for one reader; courier_nack_many_v1 gives many deliveries back, each with
-- its own result (acks in bulk take courier_exchange_v2's set-based acks).
-- courier_exchange_v4 carries such batches beside the single requests.

-- A plain batch as courier_send_batch_v2 checks and stores it (limits, room, and
-- the status of every message); the first failing message fails the batch.
CREATE FUNCTION courier_send_many_checked_v1(
    p_sender_id bigint, p_queue_ids bigint[], p_bodies bytea[], p_receivers bigint[],
    p_priorities integer[], p_contexts bigint[], p_max_body_bytes integer,
    p_started timestamptz)
RETURNS TABLE (message_ids bigint[], exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_count integer := cardinality(p_bodies);
    v_copy_requests integer[];
    v_copy_queues bigint[];
    v_row record;
BEGIN
    SELECT array_agg(k::integer ORDER BY k, q.ord), array_agg(q.id ORDER BY k, q.ord)
    INTO v_copy_requests, v_copy_queues
    FROM generate_series(1, v_count) k, unnest(p_queue_ids) WITH ORDINALITY q(id, ord);
    FOR v_row IN
        SELECT s.request, s.status, s.message, s.message_ids
        FROM courier_send_batch_v2(array_fill(p_sender_id, ARRAY[v_count]), p_bodies,
                                   p_receivers, p_priorities, p_contexts, v_copy_requests,
                                   v_copy_queues, p_max_body_bytes) s
        ORDER BY s.request
    LOOP
        IF v_row.status <> 0 THEN
            PERFORM courier_fail_v1(
                v_row.status, format('message %s of the batch: %s', v_row.request, v_row.message),
                CASE WHEN v_row.status = 12 THEN json_build_object(
                    'size', octet_length(p_bodies[v_row.request]),
                    'limit', p_max_body_bytes)::text ELSE '' END);
        END IF;
        message_ids := v_row.message_ids;
        exec_ns := courier_elapsed_ns_v1(p_started);
        RETURN NEXT;
    END LOOP;
END;
$$;

-- A batch of messages for the same queues, all or none; one row per message, in
-- order, with its ids (one per queue, in queue order). A plain batch (no delay,
-- expiry or dedup id) is checked once and stored in one statement; one that fails a
-- check, or names a queue with a limit, goes through courier_send_many_checked_v1. A
-- batch with any other message is stored one message at a time. The first bad
-- message fails the batch, naming its number.
CREATE FUNCTION courier_send_many_v1(
    p_sender_id bigint, p_queue_ids bigint[], p_bodies bytea[], p_receivers bigint[],
    p_priorities integer[], p_contexts bigint[], p_delays integer[], p_ttls integer[],
    p_dedup_ids text[], p_max_body_bytes integer, p_dedup_window_ms integer)
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
    v_k integer := 0;
    v_detail text;
BEGIN
    IF v_count = 0 THEN
        PERFORM courier_fail_v1(10, 'a batch needs at least one message');
    END IF;
    IF coalesce(cardinality(p_receivers), 0) <> v_count
       OR coalesce(cardinality(p_priorities), 0) <> v_count
       OR coalesce(cardinality(p_contexts), 0) <> v_count
       OR coalesce(cardinality(p_delays), 0) <> v_count
       OR coalesce(cardinality(p_ttls), 0) <> v_count
       OR coalesce(cardinality(p_dedup_ids), 0) <> v_count THEN
        PERFORM courier_fail_v1(10, 'every field of a batch has one value per message');
    END IF;
    IF EXISTS (SELECT FROM generate_subscripts(p_bodies, 1) k
               WHERE coalesce(p_delays[k], 0) <> 0 OR p_ttls[k] IS NOT NULL
                     OR p_dedup_ids[k] IS NOT NULL) THEN
        BEGIN
            FOR v_i IN 1..v_count LOOP
                v_k := v_i;
                RETURN QUERY
                SELECT s.message_ids, courier_elapsed_ns_v1(v_started)
                FROM courier_send_v2(p_sender_id, p_queue_ids, p_bodies[v_i], p_receivers[v_i],
                                     p_priorities[v_i], p_contexts[v_i], p_max_body_bytes,
                                     coalesce(p_delays[v_i], 0), p_ttls[v_i], p_dedup_ids[v_i],
                                     p_dedup_window_ms) s;
            END LOOP;
        EXCEPTION WHEN OTHERS THEN
            IF SQLSTATE NOT LIKE 'CQ%' THEN
                RAISE;
            END IF;
            GET STACKED DIAGNOSTICS v_detail = PG_EXCEPTION_DETAIL;
            RAISE EXCEPTION USING ERRCODE = SQLSTATE, DETAIL = v_detail,
                MESSAGE = format('message %s of the batch: %s', v_k, SQLERRM);
        END;
        RETURN;
    END IF;
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
        RETURN QUERY SELECT * FROM courier_send_many_checked_v1(
            p_sender_id, p_queue_ids, p_bodies, p_receivers, p_priorities, p_contexts,
            p_max_body_bytes, v_started);
        RETURN;
    END IF;
    SELECT c.mode INTO v_mode FROM courier_clients c WHERE c.id = p_sender_id;
    IF v_mode IS DISTINCT FROM 'read_write' OR v_found <> (
            SELECT count(DISTINCT q) FROM unnest(p_queue_ids) q) THEN
        RETURN QUERY SELECT * FROM courier_send_many_checked_v1(
            p_sender_id, p_queue_ids, p_bodies, p_receivers, p_priorities, p_contexts,
            p_max_body_bytes, v_started);
        RETURN;
    END IF;
    SELECT min(m.n) INTO v_k FROM unnest(p_bodies, p_receivers, p_priorities)
        WITH ORDINALITY m(body, receiver, priority, n)
    WHERE m.body IS NULL OR octet_length(m.body) > p_max_body_bytes
       OR m.priority IS NULL OR m.priority NOT BETWEEN 1 AND 10 OR m.receiver <= 0;
    IF v_k IS NOT NULL THEN  -- the general path names what is wrong with it
        RETURN QUERY SELECT * FROM courier_send_many_checked_v1(
            p_sender_id, p_queue_ids, p_bodies, p_receivers, p_priorities, p_contexts,
            p_max_body_bytes, v_started);
        RETURN;
    END IF;
    -- Every check passed once for the whole batch: store it in one statement. Ids are
    -- drawn in copy order, so the batch keeps its order in time.
    RETURN QUERY
    WITH drawn AS (
        SELECT m.n, q.ord, q.queue_id, m.receiver, m.context, m.priority, m.body,
               nextval('courier_messages_id_seq') AS id
        FROM unnest(p_bodies, p_receivers, p_priorities, p_contexts)
                 WITH ORDINALITY m(body, receiver, priority, context, n)
        CROSS JOIN unnest(p_queue_ids) WITH ORDINALITY q(queue_id, ord)
        ORDER BY m.n, q.ord
    ), stored AS (
        INSERT INTO courier_messages
            (id, queue_id, sender_id, receiver_id, context, priority, body)
        OVERRIDING SYSTEM VALUE
        SELECT d.id, d.queue_id, p_sender_id, d.receiver, d.context, d.priority, d.body
        FROM drawn d ORDER BY d.n, d.ord
        RETURNING id
    )
    -- Joined to what was stored, so the insert has run when exec_ns is taken.
    SELECT array_agg(d.id ORDER BY d.ord), courier_elapsed_ns_v1(v_started)
    FROM drawn d JOIN stored s ON s.id = d.id GROUP BY d.n ORDER BY d.n;
END;
$$;

-- Up to p_count messages visible to the reader, in read order; none when the queue
-- has none (a missing queue fails). Plain pops by queue take the set-based walk;
-- pops by sender and leased pops take them one at a time (courier_read_v2).
CREATE FUNCTION courier_pop_many_v1(
    p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text,
    p_count integer, p_lease_ms integer, p_instance_id bigint)
RETURNS TABLE (id bigint, queue_id bigint, sender_id bigint, receiver_id bigint,
               context bigint, priority smallint, created_at timestamptz, body bytea,
               deliveries integer, delivery_id bigint, dead_from bigint, failure text,
               exec_ns bigint)
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
                   p.exec_ns
            FROM courier_pop_batch_v2(p_queue_id, p_order,
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
                   courier_elapsed_ns_v1(v_started)
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
                   courier_elapsed_ns_v1(v_started)
            FROM taken t ORDER BY t.priority DESC, t.created_at, t.id;
        END IF;
        RETURN;
    END IF;
    FOR v_i IN 1..p_count LOOP
        SELECT * INTO v_row FROM courier_read_v2(p_reader_id, p_queue_id, p_sender_id, p_order,
                                                 true, coalesce(p_lease_ms, 0), p_instance_id);
        EXIT WHEN v_row.status <> 0;
        id := v_row.id; queue_id := v_row.queue_id; sender_id := v_row.sender_id;
        receiver_id := v_row.receiver_id; context := v_row.context;
        priority := v_row.priority; created_at := v_row.created_at; body := v_row.body;
        deliveries := v_row.deliveries; delivery_id := v_row.delivery_id;
        dead_from := v_row.dead_from; failure := v_row.failure;
        exec_ns := courier_elapsed_ns_v1(v_started);
        RETURN NEXT;
    END LOOP;
END;
$$;

-- Each delivery given back as courier_nack_v1 does, each with its own result: status
-- 0, or the status of why not (17: not held) and its message.
CREATE FUNCTION courier_nack_many_v1(
    p_holder_id bigint, p_delivery_ids bigint[], p_delay_ms integer, p_reason text)
RETURNS TABLE (request integer, status smallint, message text, exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    FOR v_i IN 1..coalesce(cardinality(p_delivery_ids), 0) LOOP
        request := v_i;
        BEGIN
            PERFORM courier_nack_v1(p_holder_id, p_delivery_ids[v_i], p_delay_ms, p_reason);
            status := 0;
            message := NULL;
        EXCEPTION WHEN OTHERS THEN
            IF SQLSTATE NOT LIKE 'CQ%' THEN
                RAISE;
            END IF;
            status := substr(SQLSTATE, 3)::smallint;
            message := SQLERRM;
        END;
        exec_ns := courier_elapsed_ns_v1(v_started);
        RETURN NEXT;
    END LOOP;
END;
$$;

-- A batch send and a batch read as courier_exchange_v4 takes them; request is the
-- caller's number.
CREATE TYPE courier_send_group_v1 AS (
    request integer, sender_id bigint, queue_ids bigint[], bodies bytea[],
    receivers bigint[], priorities integer[], contexts bigint[], delays integer[],
    ttls integer[], dedup_ids text[]);

CREATE TYPE courier_pop_group_v1 AS (
    request integer, reader_id bigint, queue_id bigint, sender_id bigint, read_order text,
    count integer, lease_ms integer, instance_id bigint);

-- courier_exchange_v3, with batch sends stored right after the other sends and batch
-- reads taken right after the other pops: acks, sends, option sends, batch sends,
-- pops and reads, batch reads. A batch answers with one row per message (ids for a
-- send, the message for a read), in order, all under its request number; a batch a
-- client got wrong answers with one row of its status alone, undone whole.
CREATE FUNCTION courier_exchange_v4(
    p_send_requests integer[], p_senders bigint[], p_bodies bytea[], p_receivers bigint[],
    p_priorities integer[], p_contexts bigint[], p_copy_sends integer[], p_copy_queues bigint[],
    p_max_body_bytes integer,
    p_pop_requests integer[], p_pop_queues bigint[], p_pop_orders text[], p_pop_readers bigint[],
    p_read_requests integer[], p_read_readers bigint[], p_read_queues bigint[],
    p_read_senders bigint[], p_read_orders text[], p_read_pops boolean[],
    p_read_leases integer[], p_read_instances bigint[],
    p_ack_requests integer[], p_ack_holders bigint[], p_ack_deliveries bigint[],
    p_option_sends courier_option_send_v1[], p_dedup_window_ms integer,
    p_send_groups courier_send_group_v1[], p_pop_groups courier_pop_group_v1[])
RETURNS TABLE (request integer, status smallint, message text, message_ids bigint[], id bigint,
               queue_id bigint, sender_id bigint, receiver_id bigint, context bigint,
               priority smallint, created_at timestamptz, body bytea, deliveries integer,
               delivery_id bigint, dead_from bigint, failure text, exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_send courier_send_group_v1;
    v_pop courier_pop_group_v1;
BEGIN
    RETURN QUERY
    SELECT * FROM courier_exchange_v3(
        p_send_requests, p_senders, p_bodies, p_receivers, p_priorities, p_contexts,
        p_copy_sends, p_copy_queues, p_max_body_bytes,
        '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}',
        p_ack_requests, p_ack_holders, p_ack_deliveries, p_option_sends, p_dedup_window_ms);
    FOREACH v_send IN ARRAY coalesce(p_send_groups, '{}') LOOP
        BEGIN
            RETURN QUERY
            SELECT v_send.request, 0::smallint, NULL::text, s.message_ids, NULL::bigint,
                   NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::smallint,
                   NULL::timestamptz, NULL::bytea, NULL::integer, NULL::bigint,
                   NULL::bigint, NULL::text, s.exec_ns
            FROM courier_send_many_v1(v_send.sender_id, v_send.queue_ids, v_send.bodies,
                                      v_send.receivers, v_send.priorities, v_send.contexts,
                                      v_send.delays, v_send.ttls, v_send.dedup_ids,
                                      p_max_body_bytes, p_dedup_window_ms) s;
        EXCEPTION WHEN OTHERS THEN
            IF SQLSTATE NOT LIKE 'CQ%' THEN
                RAISE;
            END IF;
            RETURN QUERY
            SELECT v_send.request, substr(SQLSTATE, 3)::smallint, SQLERRM, NULL::bigint[],
                   NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,
                   NULL::smallint, NULL::timestamptz, NULL::bytea, NULL::integer,
                   NULL::bigint, NULL::bigint, NULL::text, 0::bigint;
        END;
    END LOOP;
    IF cardinality(p_pop_requests) > 0 OR cardinality(p_read_requests) > 0 THEN
        RETURN QUERY
        SELECT * FROM courier_exchange_v2(
            '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', p_max_body_bytes,
            p_pop_requests, p_pop_queues, p_pop_orders, p_pop_readers,
            p_read_requests, p_read_readers, p_read_queues, p_read_senders, p_read_orders,
            p_read_pops, p_read_leases, p_read_instances, '{}', '{}', '{}');
    END IF;
    FOREACH v_pop IN ARRAY coalesce(p_pop_groups, '{}') LOOP
        BEGIN
            RETURN QUERY
            SELECT v_pop.request, 0::smallint, NULL::text, NULL::bigint[], p.id, p.queue_id,
                   p.sender_id, p.receiver_id, p.context, p.priority, p.created_at, p.body,
                   p.deliveries, p.delivery_id, p.dead_from, p.failure, p.exec_ns
            FROM courier_pop_many_v1(v_pop.reader_id, v_pop.queue_id, v_pop.sender_id,
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
                   NULL::bigint, NULL::bigint, NULL::text, 0::bigint;
        END;
    END LOOP;
END;
$$;
