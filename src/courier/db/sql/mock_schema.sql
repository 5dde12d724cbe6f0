-- Courier's mock schema: every stored function of schema.sql, with the same name and
-- signature, answering with a fixed valid result and touching no table.
--
-- Installed instead of the real schema (experiment spec: mock = "database"), it lets
-- a run measure the client, the middleware, the driver and the network without any
-- database work. Ids derived from a name come from a stable hash, so every client
-- still gets its own id; everything else is constant. exec_ns is always 0.
-- tests/integration/lab/test_mock_tiers.py holds the signatures equal to schema.sql.

-- == Helpers =========================================================================

CREATE FUNCTION courier_fail_v1(p_status integer, p_message text, p_detail text DEFAULT '')
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = 'CQ' || lpad(p_status::text, 3, '0'),
        MESSAGE = p_message,
        DETAIL = p_detail;
END;
$$;

CREATE FUNCTION courier_elapsed_ns_v1(p_started timestamptz)
RETURNS bigint
LANGUAGE sql AS $$ SELECT 0::bigint $$;

CREATE FUNCTION courier_check_name_v1(p_name text, p_what text)
RETURNS void
LANGUAGE sql AS $$ SELECT $$;

-- A positive id for a name, the same on every call; below 2^48, as node 1 hands out.
CREATE FUNCTION courier_mock_id(p_name text)
RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
    SELECT (hashtextextended(p_name, 0) & 281474976710655) + 1
$$;

-- == Clients =========================================================================

CREATE FUNCTION courier_register_client_v1(
    p_name text, p_mode text,
    OUT id bigint, OUT name text, OUT mode text, OUT online boolean, OUT exec_ns bigint)
LANGUAGE sql AS $$
    SELECT courier_mock_id(p_name), p_name, p_mode, false, 0::bigint
$$;

CREATE FUNCTION courier_get_client_v1(
    p_id bigint, p_name text,
    OUT id bigint, OUT name text, OUT mode text, OUT online boolean, OUT exec_ns bigint)
LANGUAGE sql AS $$
    SELECT coalesce(p_id, courier_mock_id(p_name)), coalesce(p_name, 'client-' || p_id),
           'read_write', false, 0::bigint
$$;

CREATE FUNCTION courier_login_v1(
    p_id bigint, p_name text, p_instance_id bigint,
    OUT id bigint, OUT name text, OUT mode text, OUT online boolean, OUT exec_ns bigint)
LANGUAGE sql AS $$
    SELECT coalesce(p_id, courier_mock_id(p_name)), coalesce(p_name, 'client-' || p_id),
           'read_write', true, 0::bigint
$$;

CREATE FUNCTION courier_logout_v1(p_client_id bigint, p_instance_id bigint, OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT 0::bigint $$;

-- == Instances =======================================================================

CREATE FUNCTION courier_register_instance_v1(
    p_address text, p_ttl_seconds double precision,
    OUT id bigint, OUT address text, OUT started_at timestamptz, OUT heartbeat_at timestamptz,
    OUT exec_ns bigint)
LANGUAGE sql AS $$
    SELECT courier_mock_id(p_address), p_address, now(), now(), 0::bigint
$$;

CREATE FUNCTION courier_register_instance_v2(
    p_address text, p_ttl_seconds double precision,
    OUT id bigint, OUT address text, OUT started_at timestamptz, OUT heartbeat_at timestamptz,
    OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT * FROM courier_register_instance_v1(p_address, p_ttl_seconds) $$;

CREATE FUNCTION courier_watch_queue_v1(
    p_queue_id bigint, p_seconds double precision, p_wait_ms integer,
    OUT watched boolean, OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT true, 0::bigint $$;

CREATE FUNCTION courier_heartbeat_v1(p_instance_id bigint, OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT 0::bigint $$;

CREATE FUNCTION courier_list_instances_v1(
    OUT ids bigint[], OUT addresses text[], OUT started_ats timestamptz[],
    OUT heartbeat_ats timestamptz[], OUT exec_ns bigint)
LANGUAGE sql AS $$
    SELECT '{}'::bigint[], '{}'::text[], '{}'::timestamptz[], '{}'::timestamptz[], 0::bigint
$$;

CREATE FUNCTION courier_expire_instances_v1(
    p_ttl_seconds double precision, OUT ids bigint[], OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT '{}'::bigint[], 0::bigint $$;

CREATE FUNCTION courier_instance_dead_v1(p_instance_id bigint)
RETURNS boolean
LANGUAGE sql AS $$ SELECT false $$;

CREATE FUNCTION courier_reap_instances_v1(
    p_instance_id bigint, OUT ids bigint[], OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT '{}'::bigint[], 0::bigint $$;

CREATE FUNCTION courier_unregister_instance_v1(p_instance_id bigint, OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT 0::bigint $$;

-- == Queues ==========================================================================

CREATE FUNCTION courier_create_queue_v1(
    p_name text, OUT id bigint, OUT name text, OUT message_count bigint, OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT courier_mock_id(p_name), p_name, 0::bigint, 0::bigint $$;

CREATE FUNCTION courier_create_queue_v2(
    p_name text, p_creator bigint, p_max_queues integer,
    OUT id bigint, OUT name text, OUT message_count bigint, OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT courier_mock_id(p_name), p_name, 0::bigint, 0::bigint $$;

CREATE FUNCTION courier_count_messages_v1(p_queue_id bigint, p_reader_id bigint, p_cap integer)
RETURNS bigint
LANGUAGE sql AS $$ SELECT 0::bigint $$;

CREATE FUNCTION courier_counted_messages_v1(p_queue_id bigint, p_reader_id bigint, p_cap integer)
RETURNS TABLE (n bigint)
LANGUAGE sql AS $$ SELECT 0::bigint $$;

CREATE FUNCTION courier_get_queue_v2(
    p_id bigint, p_name text, p_count_cap integer,
    OUT id bigint, OUT name text, OUT message_count bigint, OUT exec_ns bigint)
LANGUAGE sql AS $$
    SELECT coalesce(p_id, courier_mock_id(p_name)), coalesce(p_name, 'queue-' || p_id),
           0::bigint, 0::bigint
$$;

CREATE FUNCTION courier_list_queues_v2(
    p_count_cap integer,
    OUT ids bigint[], OUT names text[], OUT message_counts bigint[], OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT ARRAY[1]::bigint[], ARRAY['mock'], ARRAY[1]::bigint[], 0::bigint $$;

CREATE FUNCTION courier_queues_for_me_v2(
    p_reader_id bigint, p_count_cap integer,
    OUT ids bigint[], OUT names text[], OUT message_counts bigint[], OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT ARRAY[1]::bigint[], ARRAY['mock'], ARRAY[1]::bigint[], 0::bigint $$;

CREATE FUNCTION courier_delete_queue_v1(p_queue_id bigint, p_if_empty boolean, OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT 0::bigint $$;

CREATE FUNCTION courier_get_queue_v1(
    p_id bigint, p_name text,
    OUT id bigint, OUT name text, OUT message_count bigint, OUT exec_ns bigint)
LANGUAGE sql AS $$
    SELECT coalesce(p_id, courier_mock_id(p_name)), coalesce(p_name, 'queue-' || p_id),
           0::bigint, 0::bigint
$$;

CREATE FUNCTION courier_expire_instances_v2(OUT ids bigint[], OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT '{}'::bigint[], 0::bigint $$;

CREATE FUNCTION courier_list_queues_v1(
    OUT ids bigint[], OUT names text[], OUT message_counts bigint[], OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT ARRAY[1]::bigint[], ARRAY['mock'], ARRAY[1]::bigint[], 0::bigint $$;

-- == Messages ========================================================================

CREATE FUNCTION courier_pick_v1(
    p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text, p_lock boolean)
RETURNS bigint
LANGUAGE sql AS $$ SELECT 1::bigint $$;

CREATE FUNCTION courier_delete_message_v1(
    p_message_id bigint, OUT queue_id bigint, OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT 1::bigint, 0::bigint $$;

CREATE FUNCTION courier_queues_for_me_v1(
    p_reader_id bigint,
    OUT ids bigint[], OUT names text[], OUT message_counts bigint[], OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT ARRAY[1]::bigint[], ARRAY['mock'], ARRAY[1]::bigint[], 0::bigint $$;

CREATE FUNCTION courier_take_one_v1(p_reader_id bigint, p_queue_id bigint, p_order text)
RETURNS bigint
LANGUAGE sql AS $$ SELECT 1::bigint $$;

-- == Messages, delivery and dead letters (migration 0004) ============================

-- Stand-in for the real table's row type, which three helpers take or give.
CREATE TYPE courier_messages AS (id bigint);

CREATE FUNCTION courier_peek_v1(
    p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text)
RETURNS courier_messages
LANGUAGE sql AS $$ SELECT ROW(1::bigint)::courier_messages $$;

CREATE FUNCTION courier_send_v2(
    p_sender_id bigint, p_queue_ids bigint[], p_body bytea, p_receiver_id bigint,
    p_priority integer, p_context bigint, p_max_body_bytes integer,
    p_delay_ms integer, p_ttl_ms integer, p_dedup_id text, p_dedup_window_ms integer,
    OUT message_ids bigint[], OUT exec_ns bigint)
LANGUAGE sql AS $$
    SELECT ARRAY(SELECT generate_series(1, coalesce(cardinality(p_queue_ids), 0)))::bigint[],
           0::bigint
$$;

CREATE FUNCTION courier_read_v2(
    p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text, p_pop boolean,
    p_lease_ms integer, p_instance_id bigint,
    OUT status smallint, OUT id bigint, OUT queue_id bigint, OUT sender_id bigint,
    OUT receiver_id bigint, OUT context bigint, OUT priority smallint,
    OUT created_at timestamptz, OUT body bytea, OUT deliveries integer,
    OUT delivery_id bigint, OUT dead_from bigint, OUT failure text, OUT exec_ns bigint)
LANGUAGE sql AS $$
    SELECT 0::smallint, 1::bigint, coalesce(p_queue_id, 1), coalesce(p_sender_id, p_reader_id),
           NULL::bigint, NULL::bigint, 5::smallint, timestamptz '2024-01-01 00:00:00+00', 'courier mock message'::bytea,
           CASE WHEN p_lease_ms > 0 THEN 1 ELSE 0 END,
           CASE WHEN p_lease_ms > 0 THEN 1::bigint END, NULL::bigint, NULL::text, 0::bigint
$$;

CREATE FUNCTION courier_pop_response_v2(
    p_reader_id bigint, p_queue_id bigint, p_context bigint,
    OUT status smallint, OUT id bigint, OUT queue_id bigint, OUT sender_id bigint,
    OUT receiver_id bigint, OUT context bigint, OUT priority smallint,
    OUT created_at timestamptz, OUT body bytea, OUT deliveries integer,
    OUT delivery_id bigint, OUT dead_from bigint, OUT failure text, OUT exec_ns bigint)
LANGUAGE sql AS $$
    SELECT 0::smallint, 1::bigint, p_queue_id, p_reader_id, p_reader_id, p_context,
           5::smallint, timestamptz '2024-01-01 00:00:00+00', 'courier mock message'::bytea, 0, NULL::bigint, NULL::bigint, NULL::text, 0::bigint
$$;

CREATE FUNCTION courier_settle_v1(p_id bigint, p_delay_ms integer, p_failure text)
RETURNS text
LANGUAGE sql AS $$ SELECT 'visible' $$;

CREATE FUNCTION courier_lease_v1(
    p_message courier_messages, p_lease_ms integer, p_holder_id bigint, p_instance_id bigint,
    OUT delivery_id bigint, OUT deliveries integer)
LANGUAGE sql AS $$ SELECT 1::bigint, 1 $$;

CREATE FUNCTION courier_expire_v1(p_message courier_messages)
RETURNS text
LANGUAGE sql AS $$ SELECT 'dropped' $$;

CREATE FUNCTION courier_held_delivery_v1(p_holder_id bigint, p_delivery_id bigint)
RETURNS bigint
LANGUAGE sql AS $$ SELECT 1::bigint $$;

CREATE FUNCTION courier_ack_v1(p_holder_id bigint, p_delivery_id bigint, OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT 0::bigint $$;

CREATE FUNCTION courier_nack_v1(
    p_holder_id bigint, p_delivery_id bigint, p_delay_ms integer, p_reason text,
    OUT outcome text, OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT 'visible', 0::bigint $$;

CREATE FUNCTION courier_extend_v1(
    p_holder_id bigint, p_delivery_id bigint, p_lease_ms integer, OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT 0::bigint $$;

CREATE FUNCTION courier_unlease_v1(p_holder_id bigint, p_delivery_id bigint, OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT 0::bigint $$;

CREATE FUNCTION courier_restore_v1(
    p_id bigint, p_queue_id bigint, p_sender_id bigint, p_receiver_id bigint,
    p_context bigint, p_priority integer, p_created_at timestamptz, p_body bytea,
    p_deliveries integer, p_dead_from bigint, p_failure text, OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT 0::bigint $$;

CREATE FUNCTION courier_release_leases_v1(
    p_holder_id bigint, p_instance_id bigint, p_reason text,
    OUT released integer, OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT 0, 0::bigint $$;

CREATE FUNCTION courier_release_instance_leases_v1(p_instance_ids bigint[])
RETURNS integer
LANGUAGE sql AS $$ SELECT 0 $$;

CREATE FUNCTION courier_sweep_v1(
    p_limit integer, p_dedup_window_ms integer,
    OUT returned integer, OUT expired integer, OUT next_due timestamptz, OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT 0, 0, NULL::timestamptz, 0::bigint $$;

CREATE FUNCTION courier_configure_queue_v2(
    p_queue_id bigint, p_max_deliveries integer, p_dead_letter_queue_id bigint,
    p_dead_letter_expired boolean, p_max_messages integer, p_max_bytes bigint,
    p_overflow text,
    OUT queue_id bigint, OUT max_deliveries integer, OUT dead_letter_queue_id bigint,
    OUT dead_letter_expired boolean, OUT max_messages integer, OUT max_bytes bigint,
    OUT overflow text, OUT exec_ns bigint)
LANGUAGE sql AS $$
    SELECT p_queue_id, p_max_deliveries, p_dead_letter_queue_id,
           coalesce(p_dead_letter_expired, false), p_max_messages, p_max_bytes,
           coalesce(p_overflow, 'refuse'), 0::bigint
$$;

CREATE FUNCTION courier_queue_usage_v1(
    p_queue_id bigint, p_cap integer, p_bytes boolean, OUT messages bigint, OUT bytes bigint)
LANGUAGE sql AS $$ SELECT 0::bigint, 0::bigint $$;

CREATE FUNCTION courier_lock_limited_v1(p_queue_ids bigint[])
RETURNS void
LANGUAGE sql AS $$ SELECT $$;

CREATE FUNCTION courier_trim_v1(p_queue_ids bigint[])
RETURNS void
LANGUAGE sql AS $$ SELECT $$;

CREATE FUNCTION courier_room_v1(p_queue_ids bigint[])
RETURNS TABLE (queue_id bigint, messages_left bigint, bytes_left bigint)
LANGUAGE sql AS $$ SELECT NULL::bigint, NULL::bigint, NULL::bigint WHERE false $$;

CREATE FUNCTION courier_check_room_v1(p_queue_ids bigint[], p_size integer)
RETURNS void
LANGUAGE sql AS $$ SELECT $$;

CREATE FUNCTION courier_configure_queue_v1(
    p_queue_id bigint, p_max_deliveries integer, p_dead_letter_queue_id bigint,
    p_dead_letter_expired boolean,
    OUT queue_id bigint, OUT max_deliveries integer, OUT dead_letter_queue_id bigint,
    OUT dead_letter_expired boolean, OUT exec_ns bigint)
LANGUAGE sql AS $$
    SELECT p_queue_id, p_max_deliveries, p_dead_letter_queue_id,
           coalesce(p_dead_letter_expired, false), 0::bigint
$$;

CREATE FUNCTION courier_redrive_v1(
    p_queue_id bigint, p_message_ids bigint[], OUT moved integer, OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT 0, 0::bigint $$;

-- == Batched data path ==============================================================

CREATE FUNCTION courier_send_batch_v2(
    p_senders bigint[], p_bodies bytea[], p_receivers bigint[], p_priorities integer[],
    p_contexts bigint[], p_copy_requests integer[], p_copy_queues bigint[],
    p_max_body_bytes integer)
RETURNS TABLE (request integer, status smallint, message text, message_ids bigint[],
               exec_ns bigint)
LANGUAGE sql AS $$
    SELECT r.n::integer, 0::smallint, NULL::text,
           ARRAY(SELECT generate_series(1, (SELECT count(*) FROM unnest(p_copy_requests) c
                                            WHERE c = r.n)))::bigint[],
           0::bigint
    FROM generate_subscripts(p_senders, 1) r(n)
$$;

CREATE FUNCTION courier_pop_batch_v2(p_queue_id bigint, p_order text, p_readers bigint[])
RETURNS TABLE (request integer, status smallint, message text, id bigint, queue_id bigint,
               sender_id bigint, receiver_id bigint, context bigint, priority smallint,
               created_at timestamptz, body bytea, deliveries integer, delivery_id bigint,
               dead_from bigint, failure text, exec_ns bigint)
LANGUAGE sql AS $$
    SELECT r.n::integer, 0::smallint, NULL::text, 1::bigint, p_queue_id, p_readers[r.n],
           NULL::bigint, NULL::bigint, 5::smallint, timestamptz '2024-01-01 00:00:00+00', 'courier mock message'::bytea,
           0, NULL::bigint, NULL::bigint, NULL::text, 0::bigint
    FROM generate_subscripts(p_readers, 1) r(n)
$$;

CREATE FUNCTION courier_exchange_v2(
    p_send_requests integer[], p_senders bigint[], p_bodies bytea[], p_receivers bigint[],
    p_priorities integer[], p_contexts bigint[], p_copy_sends integer[], p_copy_queues bigint[],
    p_max_body_bytes integer,
    p_pop_requests integer[], p_pop_queues bigint[], p_pop_orders text[], p_pop_readers bigint[],
    p_read_requests integer[], p_read_readers bigint[], p_read_queues bigint[],
    p_read_senders bigint[], p_read_orders text[], p_read_pops boolean[],
    p_read_leases integer[], p_read_instances bigint[],
    p_ack_requests integer[], p_ack_holders bigint[], p_ack_deliveries bigint[])
RETURNS TABLE (request integer, status smallint, message text, message_ids bigint[], id bigint,
               queue_id bigint, sender_id bigint, receiver_id bigint, context bigint,
               priority smallint, created_at timestamptz, body bytea, deliveries integer,
               delivery_id bigint, dead_from bigint, failure text, exec_ns bigint)
LANGUAGE sql AS $$
    SELECT p_send_requests[s.request], 0::smallint, NULL::text, s.message_ids, NULL::bigint,
           NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::smallint,
           NULL::timestamptz, NULL::bytea, NULL::integer, NULL::bigint, NULL::bigint,
           NULL::text, 0::bigint
    FROM courier_send_batch_v2(p_senders, p_bodies, p_receivers, p_priorities, p_contexts,
                               p_copy_sends, p_copy_queues, p_max_body_bytes) s
    UNION ALL
    SELECT p_pop_requests[r.n], 0::smallint, NULL::text, NULL::bigint[], 1::bigint,
           p_pop_queues[r.n], p_pop_readers[r.n], NULL::bigint, NULL::bigint, 5::smallint,
           timestamptz '2024-01-01 00:00:00+00', 'courier mock message'::bytea, 0, NULL::bigint, NULL::bigint, NULL::text, 0::bigint
    FROM generate_subscripts(p_pop_requests, 1) r(n)
    UNION ALL
    SELECT p_read_requests[r.n], 0::smallint, NULL::text, NULL::bigint[], 1::bigint,
           coalesce(p_read_queues[r.n], 1), coalesce(p_read_senders[r.n], p_read_readers[r.n]),
           NULL::bigint, NULL::bigint, 5::smallint, timestamptz '2024-01-01 00:00:00+00', 'courier mock message'::bytea,
           0, NULL::bigint, NULL::bigint, NULL::text, 0::bigint
    FROM generate_subscripts(p_read_requests, 1) r(n)
    UNION ALL
    SELECT p_ack_requests[a.n], 0::smallint, NULL::text, NULL::bigint[], NULL::bigint,
           NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::smallint,
           NULL::timestamptz, NULL::bytea, NULL::integer, NULL::bigint, NULL::bigint,
           NULL::text, 0::bigint
    FROM generate_subscripts(p_ack_requests, 1) a(n)
$$;

CREATE TYPE courier_option_send_v1 AS (
    request integer, sender_id bigint, queue_ids bigint[], body bytea, receiver_id bigint,
    priority integer, context bigint, delay_ms integer, ttl_ms integer, dedup_id text);

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
LANGUAGE sql AS $$
    SELECT * FROM courier_exchange_v2(
        p_send_requests, p_senders, p_bodies, p_receivers, p_priorities, p_contexts,
        p_copy_sends, p_copy_queues, p_max_body_bytes, p_pop_requests, p_pop_queues,
        p_pop_orders, p_pop_readers, p_read_requests, p_read_readers, p_read_queues,
        p_read_senders, p_read_orders, p_read_pops, p_read_leases, p_read_instances,
        p_ack_requests, p_ack_holders, p_ack_deliveries)
    UNION ALL
    SELECT o.request, 0::smallint, NULL::text,
           ARRAY(SELECT generate_series(1, coalesce(cardinality(o.queue_ids), 0)))::bigint[],
           NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,
           NULL::smallint, NULL::timestamptz, NULL::bytea, NULL::integer, NULL::bigint,
           NULL::bigint, NULL::text, 0::bigint
    FROM unnest(p_option_sends) o
$$;

-- == Batch API (migration 0011) =====================================================

CREATE FUNCTION courier_send_many_checked_v1(
    p_sender_id bigint, p_queue_ids bigint[], p_bodies bytea[], p_receivers bigint[],
    p_priorities integer[], p_contexts bigint[], p_max_body_bytes integer,
    p_started timestamptz)
RETURNS TABLE (message_ids bigint[], exec_ns bigint)
LANGUAGE sql AS $$
    SELECT ARRAY(SELECT generate_series(1, coalesce(cardinality(p_queue_ids), 0)))::bigint[],
           0::bigint
    FROM generate_subscripts(p_bodies, 1)
$$;

CREATE FUNCTION courier_send_many_v1(
    p_sender_id bigint, p_queue_ids bigint[], p_bodies bytea[], p_receivers bigint[],
    p_priorities integer[], p_contexts bigint[], p_delays integer[], p_ttls integer[],
    p_dedup_ids text[], p_max_body_bytes integer, p_dedup_window_ms integer)
RETURNS TABLE (message_ids bigint[], exec_ns bigint)
LANGUAGE sql AS $$
    SELECT ARRAY(SELECT generate_series(1, coalesce(cardinality(p_queue_ids), 0)))::bigint[],
           0::bigint
    FROM generate_subscripts(p_bodies, 1)
$$;

CREATE FUNCTION courier_pop_many_v1(
    p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text,
    p_count integer, p_lease_ms integer, p_instance_id bigint)
RETURNS TABLE (id bigint, queue_id bigint, sender_id bigint, receiver_id bigint,
               context bigint, priority smallint, created_at timestamptz, body bytea,
               deliveries integer, delivery_id bigint, dead_from bigint, failure text,
               exec_ns bigint)
LANGUAGE sql AS $$
    SELECT 1::bigint, p_queue_id, coalesce(p_sender_id, p_reader_id), NULL::bigint,
           NULL::bigint, 5::smallint, timestamptz '2024-01-01 00:00:00+00',
           'courier mock message'::bytea, CASE WHEN p_lease_ms > 0 THEN 1 ELSE 0 END,
           CASE WHEN p_lease_ms > 0 THEN 1::bigint END, NULL::bigint, NULL::text, 0::bigint
    FROM generate_series(1, p_count)
$$;

CREATE FUNCTION courier_nack_many_v1(
    p_holder_id bigint, p_delivery_ids bigint[], p_delay_ms integer, p_reason text)
RETURNS TABLE (request integer, status smallint, message text, exec_ns bigint)
LANGUAGE sql AS $$
    SELECT r.n::integer, 0::smallint, NULL::text, 0::bigint
    FROM generate_subscripts(p_delivery_ids, 1) r(n)
$$;

CREATE TYPE courier_send_group_v1 AS (
    request integer, sender_id bigint, queue_ids bigint[], bodies bytea[],
    receivers bigint[], priorities integer[], contexts bigint[], delays integer[],
    ttls integer[], dedup_ids text[]);

CREATE TYPE courier_pop_group_v1 AS (
    request integer, reader_id bigint, queue_id bigint, sender_id bigint, read_order text,
    count integer, lease_ms integer, instance_id bigint);

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
LANGUAGE sql AS $$
    SELECT * FROM courier_exchange_v3(
        p_send_requests, p_senders, p_bodies, p_receivers, p_priorities, p_contexts,
        p_copy_sends, p_copy_queues, p_max_body_bytes, p_pop_requests, p_pop_queues,
        p_pop_orders, p_pop_readers, p_read_requests, p_read_readers, p_read_queues,
        p_read_senders, p_read_orders, p_read_pops, p_read_leases, p_read_instances,
        p_ack_requests, p_ack_holders, p_ack_deliveries, p_option_sends, p_dedup_window_ms)
    UNION ALL
    SELECT g.request, 0::smallint, NULL::text, s.message_ids, NULL::bigint, NULL::bigint,
           NULL::bigint, NULL::bigint, NULL::bigint, NULL::smallint, NULL::timestamptz,
           NULL::bytea, NULL::integer, NULL::bigint, NULL::bigint, NULL::text, 0::bigint
    FROM unnest(p_send_groups) g,
         courier_send_many_v1(g.sender_id, g.queue_ids, g.bodies, g.receivers, g.priorities,
                              g.contexts, g.delays, g.ttls, g.dedup_ids, 0, 0) s
    UNION ALL
    SELECT g.request, 0::smallint, NULL::text, NULL::bigint[], p.id, p.queue_id, p.sender_id,
           p.receiver_id, p.context, p.priority, p.created_at, p.body, p.deliveries,
           p.delivery_id, p.dead_from, p.failure, 0::bigint
    FROM unnest(p_pop_groups) g,
         courier_pop_many_v1(g.reader_id, g.queue_id, g.sender_id, g.read_order, g.count,
                             g.lease_ms, g.instance_id) p
$$;

-- == Triggers ========================================================================

CREATE FUNCTION courier_notify_messages_v3()
RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RETURN NULL;
END;
$$;

CREATE FUNCTION courier_messages_stored_v1()
RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RETURN NULL;
END;
$$;

CREATE FUNCTION courier_drop_queue_messages_v1()
RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RETURN NULL;
END;
$$;

-- == Auth (migration 0013) ===========================================================
-- No client has a secret here: the mock tiers run with open login (the lab's).

CREATE FUNCTION courier_check_verifier_v1(
    p_salt bytea, p_iterations integer, p_stored_key bytea, p_server_key bytea)
RETURNS void
LANGUAGE sql AS $$ SELECT $$;

CREATE FUNCTION courier_register_client_v2(
    p_name text, p_mode text, p_salt bytea, p_iterations integer, p_stored_key bytea,
    p_server_key bytea,
    OUT id bigint, OUT name text, OUT mode text, OUT online boolean, OUT exec_ns bigint)
LANGUAGE sql AS $$
    SELECT courier_mock_id(p_name), p_name, p_mode, false, 0::bigint
$$;

CREATE FUNCTION courier_auth_verifier_v1(
    p_id bigint, p_name text,
    OUT id bigint, OUT salt bytea, OUT iterations integer, OUT stored_key bytea,
    OUT server_key bytea, OUT exec_ns bigint)
LANGUAGE sql AS $$
    SELECT NULL::bigint, NULL::bytea, NULL::integer, NULL::bytea, NULL::bytea, 0::bigint
$$;

CREATE FUNCTION courier_login_v2(
    p_id bigint, p_instance_id bigint,
    OUT id bigint, OUT name text, OUT mode text, OUT online boolean, OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT p_id, 'client-' || p_id, 'read_write', true, 0::bigint $$;

CREATE FUNCTION courier_is_admin_v1(p_client_id bigint)
RETURNS boolean
LANGUAGE sql STABLE AS $$ SELECT true $$;

CREATE FUNCTION courier_set_secret_v1(
    p_actor_id bigint, p_client_id bigint, p_salt bytea, p_iterations integer,
    p_stored_key bytea, p_server_key bytea, OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT 0::bigint $$;

CREATE FUNCTION courier_set_client_enabled_v1(
    p_actor_id bigint, p_client_id bigint, p_enabled boolean, OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT 0::bigint $$;

CREATE FUNCTION courier_disabled_clients_v1(p_client_ids bigint[])
RETURNS TABLE (client_id bigint, exec_ns bigint)
LANGUAGE sql STABLE AS $$ SELECT NULL::bigint, 0::bigint WHERE false $$;

CREATE FUNCTION courier_check_owner_v1(p_actor_id bigint, p_queue_id bigint, p_action text)
RETURNS void
LANGUAGE sql AS $$ SELECT $$;

CREATE FUNCTION courier_delete_queue_v2(
    p_actor_id bigint, p_queue_id bigint, p_if_empty boolean, OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT 0::bigint $$;

CREATE FUNCTION courier_configure_queue_v3(
    p_actor_id bigint, p_queue_id bigint, p_max_deliveries integer,
    p_dead_letter_queue_id bigint, p_dead_letter_expired boolean, p_max_messages integer,
    p_max_bytes bigint, p_overflow text,
    OUT queue_id bigint, OUT max_deliveries integer, OUT dead_letter_queue_id bigint,
    OUT dead_letter_expired boolean, OUT max_messages integer, OUT max_bytes bigint,
    OUT overflow text, OUT exec_ns bigint)
LANGUAGE sql AS $$
    SELECT p_queue_id, p_max_deliveries, p_dead_letter_queue_id,
           coalesce(p_dead_letter_expired, false), p_max_messages, p_max_bytes,
           coalesce(p_overflow, 'refuse'), 0::bigint
$$;

-- == Properties (migration 0014) ===================================================

CREATE FUNCTION courier_send_v3(
    p_sender_id bigint, p_queue_ids bigint[], p_body bytea, p_receiver_id bigint,
    p_priority integer, p_context bigint, p_max_body_bytes integer,
    p_delay_ms integer, p_ttl_ms integer, p_dedup_id text, p_dedup_window_ms integer,
    p_properties jsonb, OUT message_ids bigint[], OUT exec_ns bigint)
LANGUAGE sql AS $$
    SELECT ARRAY(SELECT generate_series(1, coalesce(cardinality(p_queue_ids), 0)))::bigint[],
           0::bigint
$$;

CREATE FUNCTION courier_read_v3(
    p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text, p_pop boolean,
    p_lease_ms integer, p_instance_id bigint,
    OUT status smallint, OUT id bigint, OUT queue_id bigint, OUT sender_id bigint,
    OUT receiver_id bigint, OUT context bigint, OUT priority smallint,
    OUT created_at timestamptz, OUT body bytea, OUT deliveries integer,
    OUT delivery_id bigint, OUT dead_from bigint, OUT failure text, OUT properties jsonb,
    OUT exec_ns bigint)
LANGUAGE sql AS $$
    SELECT r.status, r.id, r.queue_id, r.sender_id, r.receiver_id, r.context, r.priority,
           r.created_at, r.body, r.deliveries, r.delivery_id, r.dead_from, r.failure,
           NULL::jsonb, r.exec_ns
    FROM courier_read_v2(p_reader_id, p_queue_id, p_sender_id, p_order, p_pop, p_lease_ms,
                         p_instance_id) r
$$;

CREATE FUNCTION courier_pop_response_v3(
    p_reader_id bigint, p_queue_id bigint, p_context bigint,
    OUT status smallint, OUT id bigint, OUT queue_id bigint, OUT sender_id bigint,
    OUT receiver_id bigint, OUT context bigint, OUT priority smallint,
    OUT created_at timestamptz, OUT body bytea, OUT deliveries integer,
    OUT delivery_id bigint, OUT dead_from bigint, OUT failure text, OUT properties jsonb,
    OUT exec_ns bigint)
LANGUAGE sql AS $$
    SELECT r.status, r.id, r.queue_id, r.sender_id, r.receiver_id, r.context, r.priority,
           r.created_at, r.body, r.deliveries, r.delivery_id, r.dead_from, r.failure,
           NULL::jsonb, r.exec_ns
    FROM courier_pop_response_v2(p_reader_id, p_queue_id, p_context) r
$$;

CREATE FUNCTION courier_restore_v2(
    p_id bigint, p_queue_id bigint, p_sender_id bigint, p_receiver_id bigint,
    p_context bigint, p_priority integer, p_created_at timestamptz, p_body bytea,
    p_deliveries integer, p_dead_from bigint, p_failure text, p_properties jsonb,
    OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT 0::bigint $$;

CREATE FUNCTION courier_pop_batch_v3(p_queue_id bigint, p_order text, p_readers bigint[])
RETURNS TABLE (request integer, status smallint, message text, id bigint, queue_id bigint,
               sender_id bigint, receiver_id bigint, context bigint, priority smallint,
               created_at timestamptz, body bytea, deliveries integer, delivery_id bigint,
               dead_from bigint, failure text, properties jsonb, exec_ns bigint)
LANGUAGE sql AS $$
    SELECT p.request, p.status, p.message, p.id, p.queue_id, p.sender_id, p.receiver_id,
           p.context, p.priority, p.created_at, p.body, p.deliveries, p.delivery_id,
           p.dead_from, p.failure, NULL::jsonb, p.exec_ns
    FROM courier_pop_batch_v2(p_queue_id, p_order, p_readers) p
$$;

CREATE FUNCTION courier_pop_many_v2(
    p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text,
    p_count integer, p_lease_ms integer, p_instance_id bigint)
RETURNS TABLE (id bigint, queue_id bigint, sender_id bigint, receiver_id bigint,
               context bigint, priority smallint, created_at timestamptz, body bytea,
               deliveries integer, delivery_id bigint, dead_from bigint, failure text,
               properties jsonb, exec_ns bigint)
LANGUAGE sql AS $$
    SELECT p.id, p.queue_id, p.sender_id, p.receiver_id, p.context, p.priority,
           p.created_at, p.body, p.deliveries, p.delivery_id, p.dead_from, p.failure,
           NULL::jsonb, p.exec_ns
    FROM courier_pop_many_v1(p_reader_id, p_queue_id, p_sender_id, p_order, p_count,
                             p_lease_ms, p_instance_id) p
$$;

CREATE FUNCTION courier_send_each_v1(
    p_sender_id bigint, p_queue_ids bigint[], p_bodies bytea[], p_receivers bigint[],
    p_priorities integer[], p_contexts bigint[], p_delays integer[], p_ttls integer[],
    p_dedup_ids text[], p_properties jsonb[], p_max_body_bytes integer,
    p_dedup_window_ms integer, p_started timestamptz)
RETURNS TABLE (message_ids bigint[], exec_ns bigint)
LANGUAGE sql AS $$
    SELECT ARRAY(SELECT generate_series(1, coalesce(cardinality(p_queue_ids), 0)))::bigint[],
           0::bigint
    FROM generate_subscripts(p_bodies, 1)
$$;

CREATE FUNCTION courier_send_many_v2(
    p_sender_id bigint, p_queue_ids bigint[], p_bodies bytea[], p_receivers bigint[],
    p_priorities integer[], p_contexts bigint[], p_delays integer[], p_ttls integer[],
    p_dedup_ids text[], p_properties jsonb[], p_max_body_bytes integer,
    p_dedup_window_ms integer)
RETURNS TABLE (message_ids bigint[], exec_ns bigint)
LANGUAGE sql AS $$
    SELECT ARRAY(SELECT generate_series(1, coalesce(cardinality(p_queue_ids), 0)))::bigint[],
           0::bigint
    FROM generate_subscripts(p_bodies, 1)
$$;

CREATE TYPE courier_option_send_v2 AS (
    request integer, sender_id bigint, queue_ids bigint[], body bytea, receiver_id bigint,
    priority integer, context bigint, delay_ms integer, ttl_ms integer, dedup_id text,
    properties jsonb);

CREATE TYPE courier_send_group_v2 AS (
    request integer, sender_id bigint, queue_ids bigint[], bodies bytea[],
    receivers bigint[], priorities integer[], contexts bigint[], delays integer[],
    ttls integer[], dedup_ids text[], properties jsonb[]);

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
LANGUAGE sql AS $$
    SELECT e.request, e.status, e.message, e.message_ids, e.id, e.queue_id, e.sender_id,
           e.receiver_id, e.context, e.priority, e.created_at, e.body, e.deliveries,
           e.delivery_id, e.dead_from, e.failure, NULL::jsonb, e.exec_ns
    FROM courier_exchange_v2(
        p_send_requests, p_senders, p_bodies, p_receivers, p_priorities, p_contexts,
        p_copy_sends, p_copy_queues, p_max_body_bytes, p_pop_requests, p_pop_queues,
        p_pop_orders, p_pop_readers, p_read_requests, p_read_readers, p_read_queues,
        p_read_senders, p_read_orders, p_read_pops, p_read_leases, p_read_instances,
        p_ack_requests, p_ack_holders, p_ack_deliveries) e
    UNION ALL
    SELECT o.request, 0::smallint, NULL::text,
           ARRAY(SELECT generate_series(1, coalesce(cardinality(o.queue_ids), 0)))::bigint[],
           NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,
           NULL::smallint, NULL::timestamptz, NULL::bytea, NULL::integer, NULL::bigint,
           NULL::bigint, NULL::text, NULL::jsonb, 0::bigint
    FROM unnest(p_option_sends) o
    UNION ALL
    SELECT g.request, 0::smallint, NULL::text, s.message_ids, NULL::bigint, NULL::bigint,
           NULL::bigint, NULL::bigint, NULL::bigint, NULL::smallint, NULL::timestamptz,
           NULL::bytea, NULL::integer, NULL::bigint, NULL::bigint, NULL::text, NULL::jsonb,
           0::bigint
    FROM unnest(p_send_groups) g,
         courier_send_many_v2(g.sender_id, g.queue_ids, g.bodies, g.receivers, g.priorities,
                              g.contexts, g.delays, g.ttls, g.dedup_ids, g.properties, 0, 0) s
    UNION ALL
    SELECT g.request, 0::smallint, NULL::text, NULL::bigint[], p.id, p.queue_id, p.sender_id,
           p.receiver_id, p.context, p.priority, p.created_at, p.body, p.deliveries,
           p.delivery_id, p.dead_from, p.failure, NULL::jsonb, 0::bigint
    FROM unnest(p_pop_groups) g,
         courier_pop_many_v2(g.reader_id, g.queue_id, g.sender_id, g.read_order, g.count,
                             g.lease_ms, g.instance_id) p
$$;

-- == Topics and transactions (migration 0015) ======================================

CREATE FUNCTION courier_drop_subscription_queues_v1()
RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RETURN NULL;
END;
$$;

CREATE FUNCTION courier_lock_topic_v1(
    p_id bigint, p_name text, p_lock text, OUT id bigint, OUT name text)
LANGUAGE sql AS $$
    SELECT coalesce(p_id, courier_mock_id(p_name)), coalesce(p_name, 'topic')
$$;

CREATE FUNCTION courier_create_topic_v1(
    p_name text, p_creator bigint, OUT id bigint, OUT name text, OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT courier_mock_id(p_name), p_name, 0::bigint $$;

CREATE FUNCTION courier_delete_topic_v1(p_id bigint, p_name text, OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT 0::bigint $$;

CREATE FUNCTION courier_topics_v1(p_id bigint, p_name text, p_count_cap integer)
RETURNS TABLE (topic_id bigint, topic_name text, queue_id bigint, queue_name text,
               name text, durable boolean, subscriber_id bigint, backlog bigint,
               exec_ns bigint)
LANGUAGE sql AS $$
    SELECT coalesce(p_id, courier_mock_id(coalesce(p_name, 'topic'))),
           coalesce(p_name, 'topic'), NULL::bigint, NULL::text, NULL::text, NULL::boolean,
           NULL::bigint, NULL::bigint, 0::bigint
$$;

CREATE FUNCTION courier_subscribe_v1(
    p_subscriber_id bigint, p_topic_id bigint, p_topic_name text, p_name text,
    p_durable boolean, p_instance_id bigint, p_max_queues integer,
    OUT queue_id bigint, OUT queue_name text, OUT topic_id bigint, OUT name text,
    OUT durable boolean, OUT subscriber_id bigint, OUT created boolean, OUT exec_ns bigint)
LANGUAGE sql AS $$
    SELECT 1::bigint, 'topic:' || coalesce(p_name, 'subscription'),
           coalesce(p_topic_id, courier_mock_id(p_topic_name)), coalesce(p_name, 'subscription'),
           p_durable, p_subscriber_id, true, 0::bigint
$$;

CREATE FUNCTION courier_unsubscribe_v1(p_queue_id bigint, OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT 0::bigint $$;

CREATE FUNCTION courier_publish_v1(
    p_sender_id bigint, p_topic_id bigint, p_topic_name text, p_body bytea,
    p_receiver_id bigint, p_priority integer, p_context bigint, p_max_body_bytes integer,
    p_delay_ms integer, p_ttl_ms integer, p_dedup_id text, p_dedup_window_ms integer,
    OUT topic_id bigint, OUT queue_ids bigint[], OUT message_ids bigint[], OUT exec_ns bigint)
LANGUAGE sql AS $$
    SELECT coalesce(p_topic_id, courier_mock_id(p_topic_name)), ARRAY[1]::bigint[],
           ARRAY[1]::bigint[], 0::bigint
$$;

CREATE FUNCTION courier_logout_v2(p_client_id bigint, p_instance_id bigint, OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT 0::bigint $$;

CREATE FUNCTION courier_commit_v1(
    p_client_id bigint, p_kinds text[], p_queue_counts integer[], p_queue_ids bigint[],
    p_topic_ids bigint[], p_topic_names text[], p_bodies bytea[], p_receivers bigint[],
    p_priorities integer[], p_contexts bigint[], p_delays integer[], p_ttls integer[],
    p_dedup_ids text[], p_deliveries bigint[], p_max_body_bytes integer,
    p_dedup_window_ms integer)
RETURNS TABLE (operation integer, message_ids bigint[], exec_ns bigint)
LANGUAGE sql AS $$
    SELECT k.ord::integer,
           CASE WHEN k.kind = 'ack' THEN '{}'::bigint[] ELSE ARRAY[1]::bigint[] END, 0::bigint
    FROM unnest(p_kinds) WITH ORDINALITY AS k(kind, ord)
$$;

-- == Topic owners; properties through publishes and transactions (migration 0016) ==

CREATE FUNCTION courier_publish_v2(
    p_sender_id bigint, p_topic_id bigint, p_topic_name text, p_body bytea,
    p_receiver_id bigint, p_priority integer, p_context bigint, p_max_body_bytes integer,
    p_delay_ms integer, p_ttl_ms integer, p_dedup_id text, p_dedup_window_ms integer,
    p_properties jsonb,
    OUT topic_id bigint, OUT queue_ids bigint[], OUT message_ids bigint[], OUT exec_ns bigint)
LANGUAGE sql AS $$
    SELECT coalesce(p_topic_id, courier_mock_id(p_topic_name)), ARRAY[1]::bigint[],
           ARRAY[1]::bigint[], 0::bigint
$$;

CREATE FUNCTION courier_commit_v2(
    p_client_id bigint, p_kinds text[], p_queue_counts integer[], p_queue_ids bigint[],
    p_topic_ids bigint[], p_topic_names text[], p_bodies bytea[], p_receivers bigint[],
    p_priorities integer[], p_contexts bigint[], p_delays integer[], p_ttls integer[],
    p_dedup_ids text[], p_deliveries bigint[], p_properties jsonb[],
    p_max_body_bytes integer, p_dedup_window_ms integer)
RETURNS TABLE (operation integer, message_ids bigint[], exec_ns bigint)
LANGUAGE sql AS $$
    SELECT k.ord::integer,
           CASE WHEN k.kind = 'ack' THEN '{}'::bigint[] ELSE ARRAY[1]::bigint[] END, 0::bigint
    FROM unnest(p_kinds) WITH ORDINALITY AS k(kind, ord)
$$;

CREATE FUNCTION courier_check_topic_owner_v1(
    p_actor_id bigint, p_topic_id bigint, p_action text)
RETURNS void
LANGUAGE sql AS $$ SELECT $$;

CREATE FUNCTION courier_delete_topic_v2(
    p_actor_id bigint, p_id bigint, p_name text, OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT 0::bigint $$;

CREATE FUNCTION courier_unsubscribe_v2(p_actor_id bigint, p_queue_id bigint, OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT 0::bigint $$;

-- == Queue access lists (migration 0017) ============================================

CREATE FUNCTION courier_allows_v1(p_client_id bigint, p_owner_id bigint, p_list bigint[])
RETURNS boolean
LANGUAGE sql STABLE AS $$ SELECT true $$;

CREATE FUNCTION courier_unreadable_v1(p_reader_id bigint)
RETURNS bigint[]
LANGUAGE sql STABLE AS $$ SELECT '{}'::bigint[] $$;

CREATE FUNCTION courier_set_queue_acl_v1(
    p_actor_id bigint, p_queue_id bigint, p_senders bigint[], p_readers bigint[],
    OUT queue_id bigint, OUT senders bigint[], OUT readers bigint[], OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT p_queue_id, p_senders, p_readers, 0::bigint $$;

CREATE FUNCTION courier_queue_acl_v1(
    p_actor_id bigint, p_queue_id bigint,
    OUT queue_id bigint, OUT senders bigint[], OUT readers bigint[], OUT exec_ns bigint)
LANGUAGE sql AS $$ SELECT p_queue_id, NULL::bigint[], NULL::bigint[], 0::bigint $$;

-- == Delivery modes (migration 0018) ================================================

CREATE TYPE courier_option_send_v3 AS (
    request integer, sender_id bigint, queue_ids bigint[], body bytea, receiver_id bigint,
    priority integer, context bigint, delay_ms integer, ttl_ms integer, dedup_id text,
    properties jsonb, persistent boolean);

CREATE TYPE courier_send_group_v3 AS (
    request integer, sender_id bigint, queue_ids bigint[], bodies bytea[],
    receivers bigint[], priorities integer[], contexts bigint[], delays integer[],
    ttls integer[], dedup_ids text[], properties jsonb[], persistent boolean[]);

CREATE FUNCTION courier_send_v4(
    p_sender_id bigint, p_queue_ids bigint[], p_body bytea, p_receiver_id bigint,
    p_priority integer, p_context bigint, p_max_body_bytes integer,
    p_delay_ms integer, p_ttl_ms integer, p_dedup_id text, p_dedup_window_ms integer,
    p_properties jsonb, p_persistent boolean, OUT message_ids bigint[], OUT exec_ns bigint)
LANGUAGE sql AS $$
    SELECT ARRAY(SELECT generate_series(1, coalesce(cardinality(p_queue_ids), 0)))::bigint[],
           0::bigint
$$;

CREATE FUNCTION courier_send_batch_v3(
    p_senders bigint[], p_bodies bytea[], p_receivers bigint[], p_priorities integer[],
    p_contexts bigint[], p_persistent boolean[], p_copy_requests integer[],
    p_copy_queues bigint[], p_max_body_bytes integer)
RETURNS TABLE (request integer, status smallint, message text, message_ids bigint[],
               exec_ns bigint)
LANGUAGE sql AS $$
    SELECT * FROM courier_send_batch_v2(p_senders, p_bodies, p_receivers, p_priorities,
                                        p_contexts, p_copy_requests, p_copy_queues,
                                        p_max_body_bytes)
$$;

-- The checked path of courier_send_batch_v3 (migration 0026) answers alike.
CREATE FUNCTION courier_send_batch_checked_v1(
    p_senders bigint[], p_bodies bytea[], p_receivers bigint[], p_priorities integer[],
    p_contexts bigint[], p_persistent boolean[], p_copy_requests integer[],
    p_copy_queues bigint[], p_max_body_bytes integer)
RETURNS TABLE (request integer, status smallint, message text, message_ids bigint[],
               exec_ns bigint)
LANGUAGE sql AS $$
    SELECT * FROM courier_send_batch_v3(p_senders, p_bodies, p_receivers, p_priorities,
                                        p_contexts, p_persistent, p_copy_requests,
                                        p_copy_queues, p_max_body_bytes)
$$;

CREATE FUNCTION courier_send_each_v2(
    p_sender_id bigint, p_queue_ids bigint[], p_bodies bytea[], p_receivers bigint[],
    p_priorities integer[], p_contexts bigint[], p_delays integer[], p_ttls integer[],
    p_dedup_ids text[], p_properties jsonb[], p_persistent boolean[],
    p_max_body_bytes integer, p_dedup_window_ms integer, p_started timestamptz)
RETURNS TABLE (message_ids bigint[], exec_ns bigint)
LANGUAGE sql AS $$
    SELECT * FROM courier_send_each_v1(p_sender_id, p_queue_ids, p_bodies, p_receivers,
                                       p_priorities, p_contexts, p_delays, p_ttls, p_dedup_ids,
                                       p_properties, p_max_body_bytes, p_dedup_window_ms,
                                       p_started)
$$;

CREATE FUNCTION courier_send_many_v3(
    p_sender_id bigint, p_queue_ids bigint[], p_bodies bytea[], p_receivers bigint[],
    p_priorities integer[], p_contexts bigint[], p_delays integer[], p_ttls integer[],
    p_dedup_ids text[], p_properties jsonb[], p_persistent boolean[],
    p_max_body_bytes integer, p_dedup_window_ms integer)
RETURNS TABLE (message_ids bigint[], exec_ns bigint)
LANGUAGE sql AS $$
    SELECT * FROM courier_send_many_v2(p_sender_id, p_queue_ids, p_bodies, p_receivers,
                                       p_priorities, p_contexts, p_delays, p_ttls, p_dedup_ids,
                                       p_properties, p_max_body_bytes, p_dedup_window_ms)
$$;

CREATE FUNCTION courier_publish_v3(
    p_sender_id bigint, p_topic_id bigint, p_topic_name text, p_body bytea,
    p_receiver_id bigint, p_priority integer, p_context bigint, p_max_body_bytes integer,
    p_delay_ms integer, p_ttl_ms integer, p_dedup_id text, p_dedup_window_ms integer,
    p_properties jsonb, p_persistent boolean,
    OUT topic_id bigint, OUT queue_ids bigint[], OUT message_ids bigint[], OUT exec_ns bigint)
LANGUAGE sql AS $$
    SELECT * FROM courier_publish_v2(p_sender_id, p_topic_id, p_topic_name, p_body,
                                     p_receiver_id, p_priority, p_context, p_max_body_bytes,
                                     p_delay_ms, p_ttl_ms, p_dedup_id, p_dedup_window_ms,
                                     p_properties)
$$;

CREATE FUNCTION courier_commit_v3(
    p_client_id bigint, p_kinds text[], p_queue_counts integer[], p_queue_ids bigint[],
    p_topic_ids bigint[], p_topic_names text[], p_bodies bytea[], p_receivers bigint[],
    p_priorities integer[], p_contexts bigint[], p_delays integer[], p_ttls integer[],
    p_dedup_ids text[], p_deliveries bigint[], p_properties jsonb[], p_persistent boolean[],
    p_max_body_bytes integer, p_dedup_window_ms integer)
RETURNS TABLE (operation integer, message_ids bigint[], exec_ns bigint)
LANGUAGE sql AS $$
    SELECT * FROM courier_commit_v2(p_client_id, p_kinds, p_queue_counts, p_queue_ids,
                                    p_topic_ids, p_topic_names, p_bodies, p_receivers,
                                    p_priorities, p_contexts, p_delays, p_ttls, p_dedup_ids,
                                    p_deliveries, p_properties, p_max_body_bytes,
                                    p_dedup_window_ms)
$$;

CREATE FUNCTION courier_exchange_v6(
    p_send_requests integer[], p_senders bigint[], p_bodies bytea[], p_receivers bigint[],
    p_priorities integer[], p_contexts bigint[], p_persistent boolean[], p_copy_sends integer[],
    p_copy_queues bigint[], p_max_body_bytes integer,
    p_pop_requests integer[], p_pop_queues bigint[], p_pop_orders text[], p_pop_readers bigint[],
    p_read_requests integer[], p_read_readers bigint[], p_read_queues bigint[],
    p_read_senders bigint[], p_read_orders text[], p_read_pops boolean[],
    p_read_leases integer[], p_read_instances bigint[],
    p_ack_requests integer[], p_ack_holders bigint[], p_ack_deliveries bigint[],
    p_option_sends courier_option_send_v3[], p_dedup_window_ms integer,
    p_send_groups courier_send_group_v3[], p_pop_groups courier_pop_group_v1[])
RETURNS TABLE (request integer, status smallint, message text, message_ids bigint[], id bigint,
               queue_id bigint, sender_id bigint, receiver_id bigint, context bigint,
               priority smallint, created_at timestamptz, body bytea, deliveries integer,
               delivery_id bigint, dead_from bigint, failure text, properties jsonb,
               exec_ns bigint)
LANGUAGE sql AS $$
    SELECT * FROM courier_exchange_v5(
        p_send_requests, p_senders, p_bodies, p_receivers, p_priorities, p_contexts,
        p_copy_sends, p_copy_queues, p_max_body_bytes, p_pop_requests, p_pop_queues,
        p_pop_orders, p_pop_readers, p_read_requests, p_read_readers, p_read_queues,
        p_read_senders, p_read_orders, p_read_pops, p_read_leases, p_read_instances,
        p_ack_requests, p_ack_holders, p_ack_deliveries,
        ARRAY(SELECT (o.request, o.sender_id, o.queue_ids, o.body, o.receiver_id, o.priority,
                      o.context, o.delay_ms, o.ttl_ms, o.dedup_id,
                      o.properties)::courier_option_send_v2
              FROM unnest(p_option_sends) o),
        p_dedup_window_ms,
        ARRAY(SELECT (g.request, g.sender_id, g.queue_ids, g.bodies, g.receivers, g.priorities,
                      g.contexts, g.delays, g.ttls, g.dedup_ids,
                      g.properties)::courier_send_group_v2
              FROM unnest(p_send_groups) g),
        p_pop_groups)
$$;

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
           NULL::text[], NULL::bigint[], 0::bigint
$$;

CREATE FUNCTION courier_exchange_v7(
    p_send_requests integer[], p_senders bigint[], p_bodies bytea[], p_receivers bigint[],
    p_priorities integer[], p_contexts bigint[], p_persistent boolean[], p_copy_sends integer[],
    p_copy_queues bigint[], p_max_body_bytes integer,
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
LANGUAGE sql AS $$
    SELECT c.request, 0::smallint, NULL::text, NULL::bigint[], courier_mock_id(c.name),
           NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::smallint,
           NULL::timestamptz, NULL::bytea, NULL::integer, NULL::bigint, NULL::bigint,
           NULL::text, NULL::jsonb, ARRAY[c.name], NULL::bigint[], 0::bigint
    FROM unnest(p_create_requests, p_create_names) c(request, name)
    UNION ALL
    SELECT e.*, NULL::text[], NULL::bigint[], 0::bigint
    FROM (SELECT e.request, e.status, e.message, e.message_ids, e.id, e.queue_id, e.sender_id,
                 e.receiver_id, e.context, e.priority, e.created_at, e.body, e.deliveries,
                 e.delivery_id, e.dead_from, e.failure, e.properties
          FROM courier_exchange_v6(
              p_send_requests, p_senders, p_bodies, p_receivers, p_priorities, p_contexts,
              p_persistent, p_copy_sends, p_copy_queues, p_max_body_bytes, p_pop_requests,
              p_pop_queues, p_pop_orders, p_pop_readers, p_read_requests, p_read_readers,
              p_read_queues, p_read_senders, p_read_orders, p_read_pops, p_read_leases,
              p_read_instances, p_ack_requests, p_ack_holders, p_ack_deliveries,
              p_option_sends, p_dedup_window_ms, p_send_groups, p_pop_groups) e) e
    UNION ALL
    SELECT l.request, 0::smallint, NULL::text, ARRAY[1]::bigint[], NULL::bigint, NULL::bigint,
           NULL::bigint, NULL::bigint, NULL::bigint, NULL::smallint, NULL::timestamptz,
           NULL::bytea, NULL::integer, NULL::bigint, NULL::bigint, NULL::text, NULL::jsonb,
           ARRAY['mock'], ARRAY[1]::bigint[], 0::bigint
    FROM unnest(p_listing_requests) l(request)
    UNION ALL
    SELECT a.* FROM unnest(p_delete_requests) d(request),
                    LATERAL courier_exchange_answer_v1(d.request, 0::smallint, NULL) a
$$;

-- == Selectors (migration 0019) =====================================================
-- The mock tier takes a selector and ignores it: every read answers as without one.

CREATE FUNCTION courier_select_ids_v1(
    p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text,
    p_count integer, p_lock boolean, p_selector jsonpath, p_vars jsonb)
RETURNS bigint[]
LANGUAGE sql AS $$ SELECT ARRAY[1]::bigint[] $$;

CREATE FUNCTION courier_check_read_v1(
    p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text, p_pop boolean,
    p_lease_ms integer)
RETURNS void
LANGUAGE sql AS $$ SELECT $$;

CREATE FUNCTION courier_read_v4(
    p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text, p_pop boolean,
    p_lease_ms integer, p_instance_id bigint, p_selector jsonpath, p_vars jsonb,
    OUT status smallint, OUT id bigint, OUT queue_id bigint, OUT sender_id bigint,
    OUT receiver_id bigint, OUT context bigint, OUT priority smallint,
    OUT created_at timestamptz, OUT body bytea, OUT deliveries integer,
    OUT delivery_id bigint, OUT dead_from bigint, OUT failure text, OUT properties jsonb,
    OUT exec_ns bigint)
LANGUAGE sql AS $$
    SELECT * FROM courier_read_v3(p_reader_id, p_queue_id, p_sender_id, p_order, p_pop,
                                  p_lease_ms, p_instance_id)
$$;

CREATE FUNCTION courier_pop_many_v3(
    p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text,
    p_count integer, p_lease_ms integer, p_instance_id bigint, p_selector jsonpath,
    p_vars jsonb)
RETURNS TABLE (id bigint, queue_id bigint, sender_id bigint, receiver_id bigint,
               context bigint, priority smallint, created_at timestamptz, body bytea,
               deliveries integer, delivery_id bigint, dead_from bigint, failure text,
               properties jsonb, exec_ns bigint)
LANGUAGE sql AS $$
    SELECT * FROM courier_pop_many_v2(p_reader_id, p_queue_id, p_sender_id, p_order, p_count,
                                      p_lease_ms, p_instance_id)
$$;

CREATE FUNCTION courier_take_selected_v1(
    p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text,
    p_count integer, p_lease_ms integer, p_instance_id bigint, p_selector jsonpath,
    p_vars jsonb)
RETURNS TABLE (id bigint, queue_id bigint, sender_id bigint, receiver_id bigint,
               context bigint, priority smallint, created_at timestamptz, body bytea,
               deliveries integer, delivery_id bigint, dead_from bigint, failure text,
               properties jsonb)
LANGUAGE sql AS $$
    SELECT p.id, p.queue_id, p.sender_id, p.receiver_id, p.context, p.priority,
           p.created_at, p.body, p.deliveries, p.delivery_id, p.dead_from, p.failure,
           p.properties
    FROM courier_pop_many_v2(p_reader_id, p_queue_id, p_sender_id, p_order, p_count,
                             p_lease_ms, p_instance_id) p
$$;

-- == Nodes, replicated queues, transfers, the controller (migrations 0020-0024) =====
-- A mock database is a cluster of one node without replicated queues: lookups find
-- nothing, listings are empty, and changes do nothing.

CREATE TYPE courier_outbox AS (
    transfer_id     bigint,
    source_queue_id bigint,
    target_queue_id bigint,
    id              bigint,
    sender_id       bigint,
    receiver_id     bigint,
    context         bigint,
    priority        smallint,
    created_at      timestamptz,
    body            bytea,
    deliveries      integer,
    expires_at      timestamptz,
    dead_from       bigint,
    failure         text,
    properties      jsonb,
    persistent      boolean
);

CREATE FUNCTION courier_claim_queue_home_v1() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RETURN NULL;
END;
$$;

CREATE FUNCTION courier_reserve_queue_home_v1(
    p_name text, p_node_id integer, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
BEGIN
    exec_ns := 0;
END;
$$;

CREATE FUNCTION courier_release_queue_home_v1(
    p_name text, p_node_id integer, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
BEGIN
    exec_ns := 0;
END;
$$;

CREATE FUNCTION courier_queue_home_v1(
    p_name text, OUT node_id integer, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
BEGIN
    exec_ns := 0;
END;
$$;

CREATE FUNCTION courier_place_queue_v1(
    OUT node_id integer, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
BEGIN
    exec_ns := 0;
END;
$$;

CREATE FUNCTION courier_become_node_v1(
    p_node_id integer, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
BEGIN
    exec_ns := 0;
END;
$$;

CREATE FUNCTION courier_adopt_client_v1(
    p_id bigint, p_name text, p_mode text, p_admin boolean, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
BEGIN
    exec_ns := 0;
END;
$$;

CREATE FUNCTION courier_release_instances_v1(
    p_instance_ids bigint[], OUT released integer, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
BEGIN
    exec_ns := 0;
END;
$$;

CREATE FUNCTION courier_end_replica_places_v1() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RETURN NULL;
END;
$$;

CREATE FUNCTION courier_place_replicas_v1(p_replicas integer)
RETURNS TABLE(node_id integer, exec_ns bigint)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN;
END;
$$;

CREATE FUNCTION courier_create_replicated_v1(
    p_name text, p_policy text, p_creator bigint, p_min_members integer, OUT id bigint, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
BEGIN
    exec_ns := 0;
END;
$$;

CREATE FUNCTION courier_add_replica_v1(
    p_replicated_id bigint, p_member_no integer, p_queue_id bigint, p_queue_name text, p_node_id integer, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
BEGIN
    exec_ns := 0;
END;
$$;

CREATE FUNCTION courier_replicated_to_delete_v1(p_name text, p_actor bigint)
RETURNS TABLE(id bigint, queue_id bigint, exec_ns bigint)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN;
END;
$$;

CREATE FUNCTION courier_drop_replicated_v1(
    p_replicated_id bigint, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
BEGIN
    exec_ns := 0;
END;
$$;

CREATE FUNCTION courier_replicated_v1(p_name text)
RETURNS TABLE(id bigint, name text, policy text, member_no integer, queue_id bigint, queue_name text, node_id integer, producers integer, consumers integer, exec_ns bigint)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN;
END;
$$;

CREATE FUNCTION courier_join_replicated_v1(
    p_name text, p_client_id bigint, p_instance_id bigint, p_role text, OUT place_id bigint, OUT member_no integer, OUT queue_id bigint, OUT queue_name text, OUT replicas integer, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
BEGIN
    exec_ns := 0;
END;
$$;

CREATE FUNCTION courier_leave_replicated_v1(
    p_place_id bigint, p_client_id bigint, OUT left_place boolean, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
BEGIN
    exec_ns := 0;
END;
$$;

CREATE FUNCTION courier_transfer_out_v1(p_transfer_id bigint, p_source_queue_id bigint, p_target_queue_id bigint, p_count integer)
RETURNS SETOF courier_outbox
LANGUAGE plpgsql AS $$
BEGIN
    RETURN;
END;
$$;

CREATE FUNCTION courier_drain_queue_v1(
    p_transfer_id bigint, p_source_queue_id bigint, p_target_queue_id bigint, OUT moved integer, OUT dropped boolean, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
BEGIN
    exec_ns := 0;
END;
$$;

CREATE FUNCTION courier_outbox_rows_v1(p_transfer_id bigint)
RETURNS SETOF courier_outbox
LANGUAGE plpgsql AS $$
BEGIN
    RETURN;
END;
$$;

CREATE FUNCTION courier_pending_transfers_v1()
RETURNS SETOF courier_outbox
LANGUAGE plpgsql AS $$
BEGIN
    RETURN;
END;
$$;

CREATE FUNCTION courier_transfer_in_v1(
    p_transfer_id bigint, p_target_queue_id bigint, p_ids bigint[], p_senders bigint[], p_receivers bigint[], p_contexts bigint[], p_priorities smallint[], p_created timestamp with time zone[], p_bodies bytea[], p_deliveries integer[], p_expires timestamp with time zone[], p_dead_from bigint[], p_failures text[], p_properties jsonb[], p_persistent boolean[], OUT received integer, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
BEGIN
    exec_ns := 0;
END;
$$;

CREATE FUNCTION courier_transfer_done_v1(
    p_transfer_id bigint, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
BEGIN
    exec_ns := 0;
END;
$$;

CREATE FUNCTION courier_transfer_back_v1(
    p_transfer_id bigint, OUT returned integer, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
BEGIN
    exec_ns := 0;
END;
$$;

CREATE FUNCTION courier_forget_transfers_v1(
    p_older_than_s double precision, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
BEGIN
    exec_ns := 0;
END;
$$;

CREATE FUNCTION courier_report_counts_v1(
    p_instance_id bigint, p_queue_ids bigint[], p_sent bigint[], p_taken bigint[], OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
BEGIN
    exec_ns := 0;
END;
$$;

CREATE FUNCTION courier_member_counts_v1()
RETURNS TABLE(queue_id bigint, sent bigint, taken bigint, exec_ns bigint)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN;
END;
$$;

CREATE FUNCTION courier_member_queues_v1()
RETURNS TABLE(queue_id bigint, exec_ns bigint)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN;
END;
$$;

CREATE FUNCTION courier_replicated_names_v1()
RETURNS TABLE(name text, min_members integer, exec_ns bigint)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN;
END;
$$;

CREATE FUNCTION courier_nodes_v1()
RETURNS TABLE(id integer, dsn text, state text, capacity integer, exec_ns bigint)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN;
END;
$$;

CREATE FUNCTION courier_next_member_v1(
    p_replicated_id bigint, OUT member_no integer, OUT created_by bigint, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
BEGIN
    exec_ns := 0;
END;
$$;

CREATE FUNCTION courier_remove_replica_v1(
    p_replicated_id bigint, p_member_no integer, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
BEGIN
    exec_ns := 0;
END;
$$;

CREATE FUNCTION courier_draining_replicas_v1(p_replicated_id bigint)
RETURNS TABLE(member_no integer, queue_id bigint, queue_name text, node_id integer, exec_ns bigint)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN;
END;
$$;

CREATE FUNCTION courier_drop_replica_v1(
    p_replicated_id bigint, p_member_no integer, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
BEGIN
    exec_ns := 0;
END;
$$;

CREATE FUNCTION courier_record_decision_v1(
    p_replicated text, p_decision text, p_member_no integer, p_node_id integer, p_moved integer, p_clients integer, p_capacity integer, p_load double precision, p_length bigint, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
BEGIN
    exec_ns := 0;
END;
$$;
