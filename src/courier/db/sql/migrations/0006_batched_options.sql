-- Migration 0006: sends that are delayed, expire or carry a dedup id ride the
-- batched call too (courier_exchange_v3), instead of a call and a commit each.
-- The whole current schema is schema.sql.

-- One such send, as courier_send_v2 takes it; request is the caller's number.
CREATE TYPE courier_option_send_v1 AS (
    request integer, sender_id bigint, queue_ids bigint[], body bytea, receiver_id bigint,
    priority integer, context bigint, delay_ms integer, ttl_ms integer, dedup_id text);

-- courier_exchange_v2, with p_option_sends stored one by one (courier_send_v2) right
-- after the plain sends: acks, plain sends, option sends, pops, other reads. A send
-- a client got wrong (a missing queue) fails alone, undone whole; anything else
-- fails the call. The caller orders sends with a dedup id by (sender, id), so two
-- batches that share ids lock them in the same order and cannot deadlock.
CREATE FUNCTION courier_exchange_v3(
    p_send_requests integer[], p_senders bigint[], p_bodies bytea[], p_receivers bigint[],
    p_priorities integer[], p_contexts bigint[], p_copy_sends integer[], p_copy_queues bigint[],
    p_max_body_bytes integer,
    p_pop_requests integer[], p_pop_queues bigint[], p_pop_orders text[], p_pop_readers bigint[],
    p_read_requests integer[], p_read_readers bigint[], p_read_queues bigint[],
    p_read_senders bigint[], p_read_orders text[], p_read_pops boolean[],
    p_read_leases integer[], p_read_instances bigint[],
    p_ack_requests integer[], p_ack_holders bigint[], p_ack_deliveries bigint[],
    p_option_sends courier_option_send_v1[], p_dedup_window_ms integer)
RETURNS TABLE (request integer, status smallint, message text, message_ids bigint[], id bigint,
               queue_id bigint, sender_id bigint, receiver_id bigint, context bigint,
               priority smallint, created_at timestamptz, body bytea, deliveries integer,
               delivery_id bigint, dead_from bigint, failure text, exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_send courier_option_send_v1;
BEGIN
    IF cardinality(p_ack_requests) > 0 OR cardinality(p_send_requests) > 0 THEN
        RETURN QUERY
        SELECT * FROM courier_exchange_v2(
            p_send_requests, p_senders, p_bodies, p_receivers, p_priorities, p_contexts,
            p_copy_sends, p_copy_queues, p_max_body_bytes,
            '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}',
            p_ack_requests, p_ack_holders, p_ack_deliveries);
    END IF;
    FOREACH v_send IN ARRAY coalesce(p_option_sends, '{}') LOOP
        BEGIN
            RETURN QUERY
            SELECT v_send.request, 0::smallint, NULL::text, s.message_ids, NULL::bigint,
                   NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::smallint,
                   NULL::timestamptz, NULL::bytea, NULL::integer, NULL::bigint,
                   NULL::bigint, NULL::text, s.exec_ns
            FROM courier_send_v2(v_send.sender_id, v_send.queue_ids, v_send.body,
                                 v_send.receiver_id, v_send.priority, v_send.context,
                                 p_max_body_bytes, v_send.delay_ms, v_send.ttl_ms,
                                 v_send.dedup_id, p_dedup_window_ms) s;
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
END;
$$;
