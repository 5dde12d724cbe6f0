-- == Topic owners; properties through publishes and transactions (migration 0016) ==
-- Properties (migration 0014) reach every copy of a publish and every send and
-- publish of a transaction: courier_publish_v2 and courier_commit_v2 take them and
-- store them through courier_send_v3. courier_publish_v1 and courier_commit_v1 keep
-- their signatures and now call the new versions without properties.
--
-- A topic's owner is its creator (courier_topics.created_by; a topic whose creator
-- is gone has no owner, and is the admins'), as for queues (migration 0013):
-- deleting a topic needs its owner or an admin (courier_delete_topic_v2); ending a
-- subscription needs its subscriber, the topic's owner (who could delete the whole
-- topic anyway) or an admin (courier_unsubscribe_v2); resuming a durable
-- subscription by name is for its subscriber alone (courier_subscribe_v1, replaced
-- in place). Refusals are NOT_AUTHORISED (13). courier_delete_topic_v1 and
-- courier_unsubscribe_v1 stay, unchecked, for middleware from before this migration.

-- courier_publish_v1 with p_properties (a jsonb object, or NULL for none), which
-- every copy carries.
CREATE FUNCTION courier_publish_v2(
    p_sender_id bigint, p_topic_id bigint, p_topic_name text, p_body bytea,
    p_receiver_id bigint, p_priority integer, p_context bigint, p_max_body_bytes integer,
    p_delay_ms integer, p_ttl_ms integer, p_dedup_id text, p_dedup_window_ms integer,
    p_properties jsonb,
    OUT topic_id bigint, OUT queue_ids bigint[], OUT message_ids bigint[], OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
    v_topic record;
BEGIN
    SELECT * INTO v_topic FROM courier_lock_topic_v1(p_topic_id, p_topic_name, 'share');
    topic_id := v_topic.id;
    -- Key-share locks keep the queues until the copies are in; a queue deleted while
    -- this waited is skipped.
    SELECT coalesce(array_agg(l.id ORDER BY l.id), '{}') INTO queue_ids FROM (
        SELECT q.id FROM courier_subscriptions s JOIN courier_queues q ON q.id = s.queue_id
        WHERE s.topic_id = v_topic.id ORDER BY q.id FOR KEY SHARE OF q
    ) l;
    IF cardinality(queue_ids) = 0 THEN
        IF octet_length(p_body) > p_max_body_bytes THEN
            PERFORM courier_fail_v1(12,
                format('message body is %s bytes; the limit is %s', octet_length(p_body),
                       p_max_body_bytes),
                json_build_object('size', octet_length(p_body), 'limit', p_max_body_bytes)::text);
        END IF;
        IF p_priority IS NULL OR p_priority NOT BETWEEN 1 AND 10 THEN
            PERFORM courier_fail_v1(11, format('priority %s is not from 1 to 10', p_priority));
        END IF;
        IF jsonb_typeof(p_properties) <> 'object' THEN
            PERFORM courier_fail_v1(10, 'properties are an object of text keys and values');
        END IF;
        message_ids := '{}';
    ELSE
        SELECT s.message_ids INTO message_ids FROM courier_send_v3(
            p_sender_id, queue_ids, p_body, p_receiver_id, p_priority, p_context,
            p_max_body_bytes, p_delay_ms, p_ttl_ms, p_dedup_id, p_dedup_window_ms,
            p_properties) s;
    END IF;
    IF p_dedup_id IS NOT NULL AND cardinality(message_ids) > 0 THEN
        -- A retry may be answered with the first publish's ids: name each one's queue
        -- as it is now (0: that copy was taken since).
        queue_ids := ARRAY(
            SELECT coalesce(m.queue_id, h.queue_id, 0)
            FROM unnest(message_ids) WITH ORDINALITY AS x(id, ord)
            LEFT JOIN courier_messages m ON m.id = x.id
            LEFT JOIN courier_held_messages h ON h.id = x.id
            ORDER BY x.ord);
    END IF;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

CREATE OR REPLACE FUNCTION courier_publish_v1(
    p_sender_id bigint, p_topic_id bigint, p_topic_name text, p_body bytea,
    p_receiver_id bigint, p_priority integer, p_context bigint, p_max_body_bytes integer,
    p_delay_ms integer, p_ttl_ms integer, p_dedup_id text, p_dedup_window_ms integer,
    OUT topic_id bigint, OUT queue_ids bigint[], OUT message_ids bigint[], OUT exec_ns bigint)
LANGUAGE sql AS $$
    SELECT * FROM courier_publish_v2(
        p_sender_id, p_topic_id, p_topic_name, p_body, p_receiver_id, p_priority, p_context,
        p_max_body_bytes, p_delay_ms, p_ttl_ms, p_dedup_id, p_dedup_window_ms, NULL)
$$;

-- courier_commit_v1 with p_properties: per operation its properties (a jsonb object,
-- or NULL for none; ignored for an ack), stored with every message a send or publish
-- stores.
CREATE FUNCTION courier_commit_v2(
    p_client_id bigint, p_kinds text[], p_queue_counts integer[], p_queue_ids bigint[],
    p_topic_ids bigint[], p_topic_names text[], p_bodies bytea[], p_receivers bigint[],
    p_priorities integer[], p_contexts bigint[], p_delays integer[], p_ttls integer[],
    p_dedup_ids text[], p_deliveries bigint[], p_properties jsonb[],
    p_max_body_bytes integer, p_dedup_window_ms integer)
RETURNS TABLE (operation integer, message_ids bigint[], exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
    v_at integer := 0;
    v_from integer := 1;
    v_ids bigint[];
    v_detail text;
BEGIN
    WHILE v_at < coalesce(cardinality(p_kinds), 0) LOOP
        v_at := v_at + 1;
        IF p_kinds[v_at] = 'send' THEN
            SELECT s.message_ids INTO v_ids FROM courier_send_v3(
                p_client_id, p_queue_ids[v_from : v_from + p_queue_counts[v_at] - 1],
                p_bodies[v_at], p_receivers[v_at], p_priorities[v_at], p_contexts[v_at],
                p_max_body_bytes, p_delays[v_at], p_ttls[v_at], p_dedup_ids[v_at],
                p_dedup_window_ms, p_properties[v_at]) s;
            v_from := v_from + p_queue_counts[v_at];
        ELSIF p_kinds[v_at] = 'publish' THEN
            SELECT p.message_ids INTO v_ids FROM courier_publish_v2(
                p_client_id, p_topic_ids[v_at], p_topic_names[v_at], p_bodies[v_at],
                p_receivers[v_at], p_priorities[v_at], p_contexts[v_at], p_max_body_bytes,
                p_delays[v_at], p_ttls[v_at], p_dedup_ids[v_at], p_dedup_window_ms,
                p_properties[v_at]) p;
        ELSIF p_kinds[v_at] = 'ack' THEN
            PERFORM courier_ack_v1(p_client_id, p_deliveries[v_at]);
            v_ids := '{}';
        ELSE
            PERFORM courier_fail_v1(10, format('operation kind %s is unknown', p_kinds[v_at]));
        END IF;
        operation := v_at;
        message_ids := v_ids;
        exec_ns := courier_elapsed_ns_v1(v_started);
        RETURN NEXT;
    END LOOP;
EXCEPTION WHEN OTHERS THEN
    IF SQLSTATE NOT LIKE 'CQ%' THEN
        RAISE;
    END IF;
    GET STACKED DIAGNOSTICS v_detail = PG_EXCEPTION_DETAIL;
    RAISE EXCEPTION USING
        ERRCODE = SQLSTATE,
        MESSAGE = format('operation %s of the transaction: %s', v_at, SQLERRM),
        DETAIL = coalesce(v_detail, '');
END;
$$;

CREATE OR REPLACE FUNCTION courier_commit_v1(
    p_client_id bigint, p_kinds text[], p_queue_counts integer[], p_queue_ids bigint[],
    p_topic_ids bigint[], p_topic_names text[], p_bodies bytea[], p_receivers bigint[],
    p_priorities integer[], p_contexts bigint[], p_delays integer[], p_ttls integer[],
    p_dedup_ids text[], p_deliveries bigint[], p_max_body_bytes integer,
    p_dedup_window_ms integer)
RETURNS TABLE (operation integer, message_ids bigint[], exec_ns bigint)
LANGUAGE sql AS $$
    SELECT * FROM courier_commit_v2(
        p_client_id, p_kinds, p_queue_counts, p_queue_ids, p_topic_ids, p_topic_names,
        p_bodies, p_receivers, p_priorities, p_contexts, p_delays, p_ttls, p_dedup_ids,
        p_deliveries, NULL, p_max_body_bytes, p_dedup_window_ms)
$$;

-- TOPIC_NOT_FOUND, or NOT_AUTHORISED unless the actor owns the topic (created it) or
-- is an admin. A topic whose creator is gone is the admins'.
CREATE FUNCTION courier_check_topic_owner_v1(
    p_actor_id bigint, p_topic_id bigint, p_action text)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_topic courier_topics%ROWTYPE;
BEGIN
    SELECT * INTO v_topic FROM courier_topics t WHERE t.id = p_topic_id;
    IF NOT FOUND THEN
        PERFORM courier_fail_v1(48, format('topic %s does not exist', p_topic_id));
    END IF;
    IF v_topic.created_by IS DISTINCT FROM p_actor_id AND NOT courier_is_admin_v1(p_actor_id)
    THEN
        PERFORM courier_fail_v1(13, format(
            'only the owner of topic %s or an admin may %s it', v_topic.name, p_action));
    END IF;
END;
$$;

-- courier_delete_topic_v1 for its owner or an admin alone.
CREATE FUNCTION courier_delete_topic_v2(
    p_actor_id bigint, p_id bigint, p_name text, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
    v_topic record;
BEGIN
    SELECT * INTO v_topic FROM courier_lock_topic_v1(p_id, p_name, 'delete');
    PERFORM courier_check_topic_owner_v1(p_actor_id, v_topic.id, 'delete');
    DELETE FROM courier_topics t WHERE t.id = v_topic.id;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- courier_unsubscribe_v1 for the subscriber, the topic's owner or an admin alone.
CREATE FUNCTION courier_unsubscribe_v2(p_actor_id bigint, p_queue_id bigint, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
    v_topic_id bigint;
    v_subscription courier_subscriptions%ROWTYPE;
    v_owner bigint;
BEGIN
    SELECT s.topic_id INTO v_topic_id FROM courier_subscriptions s WHERE s.queue_id = p_queue_id;
    IF FOUND THEN
        PERFORM courier_lock_topic_v1(v_topic_id, NULL, 'update');
        SELECT * INTO v_subscription FROM courier_subscriptions s WHERE s.queue_id = p_queue_id;
    END IF;
    IF v_topic_id IS NULL OR v_subscription.queue_id IS NULL THEN
        PERFORM courier_fail_v1(1, format('queue %s is no subscription', p_queue_id));
    END IF;
    SELECT t.created_by INTO v_owner FROM courier_topics t WHERE t.id = v_topic_id;
    IF p_actor_id IS DISTINCT FROM v_subscription.subscriber_id
       AND p_actor_id IS DISTINCT FROM v_owner AND NOT courier_is_admin_v1(p_actor_id) THEN
        PERFORM courier_fail_v1(13, format(
            'only its subscriber, the owner of its topic or an admin may end subscription %s',
            v_subscription.name));
    END IF;
    DELETE FROM courier_subscriptions s WHERE s.queue_id = p_queue_id;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- As in migration 0015, except that resuming a durable subscription is for its
-- subscriber alone: anyone else naming it is NOT_AUTHORISED (13).
CREATE OR REPLACE FUNCTION courier_subscribe_v1(
    p_subscriber_id bigint, p_topic_id bigint, p_topic_name text, p_name text,
    p_durable boolean, p_instance_id bigint, p_max_queues integer,
    OUT queue_id bigint, OUT queue_name text, OUT topic_id bigint, OUT name text,
    OUT durable boolean, OUT subscriber_id bigint, OUT created boolean, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
    v_topic record;
    v_client text;
    v_existing record;
BEGIN
    SELECT * INTO v_topic FROM courier_lock_topic_v1(p_topic_id, p_topic_name, 'update');
    SELECT c.name INTO v_client FROM courier_clients c WHERE c.id = p_subscriber_id;
    IF NOT FOUND THEN
        PERFORM courier_fail_v1(6, format('no client %s', p_subscriber_id));
    END IF;
    IF NOT p_durable THEN
        PERFORM 1 FROM courier_instances i WHERE i.id = p_instance_id FOR KEY SHARE;
        IF NOT FOUND THEN
            PERFORM courier_fail_v1(16, format('instance %s is not registered', p_instance_id));
        END IF;
    END IF;
    name := coalesce(p_name, CASE WHEN p_durable THEN v_client
        ELSE format('~%s.%s', p_subscriber_id, nextval('courier_subscription_numbers')) END);
    PERFORM courier_check_name_v1(name, 'subscription');
    SELECT * INTO v_existing FROM courier_subscriptions s
    WHERE s.topic_id = v_topic.id AND s.name = courier_subscribe_v1.name;
    IF FOUND THEN
        IF NOT (v_existing.durable AND p_durable) THEN
            PERFORM courier_fail_v1(2, format('topic %s has a subscription %s', v_topic.name, name));
        END IF;
        IF v_existing.subscriber_id <> p_subscriber_id THEN
            PERFORM courier_fail_v1(13, format(
                'subscription %s of topic %s is another client''s: only its subscriber may'
                ' resume it', name, v_topic.name));
        END IF;
        SELECT q.id, q.name INTO queue_id, queue_name
        FROM courier_queues q WHERE q.id = v_existing.queue_id;
        topic_id := v_topic.id;
        durable := true;
        subscriber_id := v_existing.subscriber_id;
        created := false;
        exec_ns := courier_elapsed_ns_v1(v_started);
        RETURN;
    END IF;
    SELECT c.id, c.name INTO queue_id, queue_name FROM courier_create_queue_v2(
        v_topic.name || ':' || name, p_subscriber_id, p_max_queues) c;
    INSERT INTO courier_subscriptions (queue_id, topic_id, name, subscriber_id, durable, instance_id)
    VALUES (queue_id, v_topic.id, name, p_subscriber_id, p_durable,
            CASE WHEN p_durable THEN NULL ELSE p_instance_id END);
    topic_id := v_topic.id;
    durable := p_durable;
    subscriber_id := p_subscriber_id;
    created := true;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;
