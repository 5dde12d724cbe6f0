-- Migration 0033: creating and deleting queues and listing the queues a reader may
-- read ride the batched exchange.
-- The whole current schema, documented, is schema.sql.
--
-- Each of these was a call and a transaction of its own, so a workload that creates
-- and deletes a queue per cycle (the lab's standard cycle) paid three commits and
-- three statements' fixed cost beside its batched sends and reads: on the
-- development box 404 µs of database CPU for a create, a listing and a delete in
-- three transactions, 264 µs in one. courier_exchange_v7 takes them with the rest of
-- a batch, in this order:
--   1. the creates, each in a subtransaction (a taken name or a quota fails it alone);
--   2. everything courier_exchange_v6 does, as it does it;
--   3. the listings of queues for a reader (they see the batch's own sends);
--   4. the deletes, each in a subtransaction, last.
-- A create or a delete that waited for a lock would hold up every request of the
-- batch, and could close a cycle of waits with another batch (a create waits for a
-- concurrent create of its name and locks its creator; a delete locks its queue
-- against concurrent sends and takes the rows of its messages). Both therefore run
-- with a lock timeout of a millisecond. One that would wait answers status -1,
-- "left out": the middleware runs it alone once the batch has committed, as every
-- create and delete ran before. So does the delete of a queue holding more than 64
-- messages, whose cascade would make the batch as slow as the queue is long.

-- A row of courier_exchange_v7 that carries only a request's status: a success with
-- nothing to return, or a failure and its message.
CREATE FUNCTION courier_exchange_answer_v1(
    p_request integer, p_status smallint, p_message text, p_exec_ns bigint DEFAULT 0)
RETURNS TABLE (request integer, status smallint, message text, message_ids bigint[], id bigint,
               queue_id bigint, sender_id bigint, receiver_id bigint, context bigint,
               priority smallint, created_at timestamptz, body bytea, deliveries integer,
               delivery_id bigint, dead_from bigint, failure text, properties jsonb,
               names text[], counts bigint[], exec_ns bigint)
LANGUAGE sql AS $$
    SELECT p_request, p_status, p_message, NULL::bigint[], NULL::bigint, NULL::bigint,
           NULL::bigint, NULL::bigint, NULL::bigint, NULL::smallint, NULL::timestamptz,
           NULL::bytea, NULL::integer, NULL::bigint, NULL::bigint, NULL::text, NULL::jsonb,
           NULL::text[], NULL::bigint[], p_exec_ns
$$;

CREATE FUNCTION courier_exchange_v7(
    p_send_requests integer[], p_senders bigint[], p_bodies bytea[], p_receivers bigint[],
    p_priorities integer[], p_contexts bigint[], p_persistent boolean[], p_copy_sends integer[],
    p_copy_queues bigint[],
    p_max_body_bytes integer,
    p_pop_requests integer[], p_pop_queues bigint[], p_pop_orders text[], p_pop_readers bigint[],
    p_read_requests integer[], p_read_readers bigint[], p_read_queues bigint[],
    p_read_senders bigint[], p_read_orders text[], p_read_pops boolean[],
    p_read_leases integer[], p_read_instances bigint[],
    p_ack_requests integer[], p_ack_holders bigint[], p_ack_deliveries bigint[],
    p_option_sends courier_option_send_v3[], p_dedup_window_ms integer,
    p_send_groups courier_send_group_v3[], p_pop_groups courier_pop_group_v1[],
    p_create_requests integer[], p_create_names text[], p_create_creators bigint[],
    p_create_quotas integer[],
    p_listing_requests integer[], p_listing_readers bigint[], p_count_cap integer,
    p_delete_requests integer[], p_delete_queues bigint[], p_delete_actors bigint[],
    p_delete_if_empty boolean[])
RETURNS TABLE (request integer, status smallint, message text, message_ids bigint[], id bigint,
               queue_id bigint, sender_id bigint, receiver_id bigint, context bigint,
               priority smallint, created_at timestamptz, body bytea, deliveries integer,
               delivery_id bigint, dead_from bigint, failure text, properties jsonb,
               names text[], counts bigint[], exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
    v_lock_timeout text := current_setting('lock_timeout');
BEGIN
    PERFORM set_config('lock_timeout', '1ms', true);
    FOR v_i IN 1..coalesce(cardinality(p_create_requests), 0) LOOP
        BEGIN
            RETURN QUERY
            SELECT p_create_requests[v_i], 0::smallint, NULL::text, NULL::bigint[], c.id,
                   NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::smallint,
                   NULL::timestamptz, NULL::bytea, NULL::integer, NULL::bigint, NULL::bigint,
                   NULL::text, NULL::jsonb, ARRAY[c.name], NULL::bigint[],
                   courier_elapsed_ns_v1(v_started)
            FROM courier_create_queue_v2(p_create_names[v_i], p_create_creators[v_i],
                                         p_create_quotas[v_i]) c;
        EXCEPTION
            WHEN lock_not_available THEN
                RETURN QUERY SELECT * FROM courier_exchange_answer_v1(
                    p_create_requests[v_i], -1::smallint, SQLERRM);
            WHEN OTHERS THEN
                IF SQLSTATE NOT LIKE 'CQ%' THEN
                    RAISE;
                END IF;
                RETURN QUERY SELECT * FROM courier_exchange_answer_v1(
                    p_create_requests[v_i], substr(SQLSTATE, 3)::smallint, SQLERRM);
        END;
    END LOOP;
    PERFORM set_config('lock_timeout', v_lock_timeout, true);
    IF coalesce(cardinality(p_send_requests), 0) + coalesce(cardinality(p_pop_requests), 0)
       + coalesce(cardinality(p_read_requests), 0) + coalesce(cardinality(p_ack_requests), 0)
       + coalesce(cardinality(p_option_sends), 0) + coalesce(cardinality(p_send_groups), 0)
       + coalesce(cardinality(p_pop_groups), 0) > 0 THEN
        RETURN QUERY
        SELECT e.request, e.status, e.message, e.message_ids, e.id, e.queue_id, e.sender_id,
               e.receiver_id, e.context, e.priority, e.created_at, e.body, e.deliveries,
               e.delivery_id, e.dead_from, e.failure, e.properties, NULL::text[],
               NULL::bigint[], e.exec_ns
        FROM courier_exchange_v6(
            p_send_requests, p_senders, p_bodies, p_receivers, p_priorities, p_contexts,
            p_persistent, p_copy_sends, p_copy_queues, p_max_body_bytes, p_pop_requests,
            p_pop_queues, p_pop_orders, p_pop_readers, p_read_requests, p_read_readers,
            p_read_queues, p_read_senders, p_read_orders, p_read_pops, p_read_leases,
            p_read_instances, p_ack_requests, p_ack_holders, p_ack_deliveries, p_option_sends,
            p_dedup_window_ms, p_send_groups, p_pop_groups) e;
    END IF;
    -- A listing's queue ids travel in message_ids.
    FOR v_i IN 1..coalesce(cardinality(p_listing_requests), 0) LOOP
        RETURN QUERY
        SELECT p_listing_requests[v_i], 0::smallint, NULL::text, l.ids, NULL::bigint,
               NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::smallint,
               NULL::timestamptz, NULL::bytea, NULL::integer, NULL::bigint, NULL::bigint,
               NULL::text, NULL::jsonb, l.names, l.message_counts,
               courier_elapsed_ns_v1(v_started)
        FROM courier_queues_for_me_v2(p_listing_readers[v_i], p_count_cap) l;
    END LOOP;
    PERFORM set_config('lock_timeout', '1ms', true);
    FOR v_i IN 1..coalesce(cardinality(p_delete_requests), 0) LOOP
        BEGIN
            IF EXISTS (SELECT 1 FROM courier_messages m
                       WHERE m.queue_id = p_delete_queues[v_i] OFFSET 64)
               OR EXISTS (SELECT 1 FROM courier_held_messages h
                          WHERE h.queue_id = p_delete_queues[v_i] OFFSET 64) THEN
                RETURN QUERY SELECT * FROM courier_exchange_answer_v1(
                    p_delete_requests[v_i], -1::smallint, 'the queue holds many messages');
                CONTINUE;
            END IF;
            IF p_delete_actors[v_i] IS NOT NULL THEN
                PERFORM courier_check_owner_v1(p_delete_actors[v_i], p_delete_queues[v_i],
                                               'delete');
            END IF;
            PERFORM courier_delete_queue_v1(p_delete_queues[v_i], p_delete_if_empty[v_i]);
            RETURN QUERY SELECT * FROM courier_exchange_answer_v1(
                p_delete_requests[v_i], 0::smallint, NULL, courier_elapsed_ns_v1(v_started));
        EXCEPTION
            WHEN lock_not_available THEN
                RETURN QUERY SELECT * FROM courier_exchange_answer_v1(
                    p_delete_requests[v_i], -1::smallint, SQLERRM);
            WHEN OTHERS THEN
                IF SQLSTATE NOT LIKE 'CQ%' THEN
                    RAISE;
                END IF;
                RETURN QUERY SELECT * FROM courier_exchange_answer_v1(
                    p_delete_requests[v_i], substr(SQLSTATE, 3)::smallint, SQLERRM);
        END;
    END LOOP;
    PERFORM set_config('lock_timeout', v_lock_timeout, true);
END;
$$;
