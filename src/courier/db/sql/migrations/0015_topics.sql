-- == Topics and transactions (migration 0015) ======================================
-- Publish/subscribe on top of queues. A topic is a name; each subscription to it is
-- a queue of its own, named '<topic>:<subscription>', which subscribers read with the
-- ordinary queue operations. A publish stores one copy of the message in every
-- subscription's queue, all or none, in one courier_send_v2 call.
--
-- A durable subscription lives until it is unsubscribed (or its topic deleted) and
-- keeps collecting while its subscriber is away. A non-durable one belongs to its
-- subscriber's session on one middleware instance: logging out (a closing
-- connection logs out) removes it, and so does the instance's removal (stopped,
-- reaped after a crash, or expired), through the foreign key below.
--
-- Locks: a publish takes its topic row FOR SHARE, subscribe and unsubscribe take it
-- FOR NO KEY UPDATE, so a publish sees the subscriptions either wholly before or
-- wholly after a concurrent (un)subscribe: a message never reaches part of them.
--
-- Statuses (raised as CQnnn, see the header): 48 TOPIC_NOT_FOUND, 49 TOPIC_EXISTS
-- (the 0x30 block, beside the topic opcodes 0x30-0x3F).

CREATE TABLE courier_topics (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name       text        NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 255),
    created_by bigint      REFERENCES courier_clients (id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE courier_subscriptions (
    -- The subscription's queue: deleting the queue ends the subscription.
    queue_id      bigint      PRIMARY KEY REFERENCES courier_queues (id) ON DELETE CASCADE,
    topic_id      bigint      NOT NULL REFERENCES courier_topics (id) ON DELETE CASCADE,
    name          text        NOT NULL CHECK (length(name) BETWEEN 1 AND 255),
    subscriber_id bigint      NOT NULL REFERENCES courier_clients (id) ON DELETE CASCADE,
    durable       boolean     NOT NULL,
    -- A non-durable subscription's middleware instance; NULL for a durable one.
    instance_id   bigint      REFERENCES courier_instances (id) ON DELETE CASCADE,
    created_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (topic_id, name),
    CHECK (durable = (instance_id IS NULL))
);

CREATE INDEX courier_subscriptions_instance ON courier_subscriptions (instance_id, subscriber_id)
    WHERE instance_id IS NOT NULL;

-- Numbers the names of unnamed non-durable subscriptions.
CREATE SEQUENCE courier_subscription_numbers;

-- A subscription removed any way (unsubscribe, its topic deleted, its instance gone,
-- its subscriber logged out) takes its queue and the queue's messages with it. When
-- the queue itself was deleted first, there is nothing left to delete.
CREATE FUNCTION courier_drop_subscription_queues_v1()
RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM courier_queues q USING gone g WHERE q.id = g.queue_id;
    RETURN NULL;
END;
$$;

CREATE TRIGGER courier_subscriptions_gone
    AFTER DELETE ON courier_subscriptions
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION courier_drop_subscription_queues_v1();

-- The topic by id, or by name when p_id is NULL, locked as p_lock says ('share' for a
-- publish, 'update' to change its subscriptions, 'delete'); TOPIC_NOT_FOUND (48).
CREATE FUNCTION courier_lock_topic_v1(
    p_id bigint, p_name text, p_lock text, OUT id bigint, OUT name text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    IF p_lock = 'share' THEN
        SELECT t.id, t.name INTO id, name FROM courier_topics t
        WHERE t.id = p_id OR (p_id IS NULL AND t.name = p_name) FOR SHARE;
    ELSIF p_lock = 'update' THEN
        SELECT t.id, t.name INTO id, name FROM courier_topics t
        WHERE t.id = p_id OR (p_id IS NULL AND t.name = p_name) FOR NO KEY UPDATE;
    ELSE
        SELECT t.id, t.name INTO id, name FROM courier_topics t
        WHERE t.id = p_id OR (p_id IS NULL AND t.name = p_name) FOR UPDATE;
    END IF;
    IF NOT FOUND THEN
        PERFORM courier_fail_v1(48, format('topic %s does not exist', coalesce(p_id::text, p_name)));
    END IF;
END;
$$;

CREATE FUNCTION courier_create_topic_v1(
    p_name text, p_creator bigint, OUT id bigint, OUT name text, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    PERFORM courier_check_name_v1(p_name, 'topic');
    INSERT INTO courier_topics (name, created_by) VALUES (p_name, p_creator)
    ON CONFLICT (name) DO NOTHING
    RETURNING courier_topics.id, courier_topics.name INTO id, name;
    IF NOT FOUND THEN
        PERFORM courier_fail_v1(49, format('topic %s exists', p_name));
    END IF;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- Deletes the topic, its subscriptions, their queues and every message in them.
CREATE FUNCTION courier_delete_topic_v1(p_id bigint, p_name text, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
    v_topic record;
BEGIN
    SELECT * INTO v_topic FROM courier_lock_topic_v1(p_id, p_name, 'delete');
    DELETE FROM courier_topics t WHERE t.id = v_topic.id;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- One row per subscription of the topic given by id or name (TOPIC_NOT_FOUND), or of
-- every topic when both are NULL, ordered by topic then queue id; a topic without
-- subscriptions is one row whose subscription columns are NULL. backlog is the
-- queue's visible messages, counted up to p_count_cap.
CREATE FUNCTION courier_topics_v1(p_id bigint, p_name text, p_count_cap integer)
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
    SELECT t.id, t.name, s.queue_id, q.name, s.name, s.durable, s.subscriber_id,
           CASE WHEN s.queue_id IS NULL THEN NULL
                ELSE courier_count_messages_v1(s.queue_id, NULL, p_count_cap) END,
           courier_elapsed_ns_v1(v_started)
    FROM courier_topics t
    LEFT JOIN courier_subscriptions s ON s.topic_id = t.id
    LEFT JOIN courier_queues q ON q.id = s.queue_id
    WHERE (p_id IS NULL AND p_name IS NULL) OR t.id = p_id OR (p_id IS NULL AND t.name = p_name)
    ORDER BY t.id, s.queue_id;
END;
$$;

-- Subscribes p_subscriber_id to the topic under p_name (NULL: the subscriber's name
-- for a durable subscription, '~<subscriber>.<number>' for a non-durable one), and
-- creates its queue '<topic>:<name>' (counted against p_max_queues like any queue
-- the client creates). Subscribing again under the name of an existing durable
-- subscription, durably, resumes it (created is false); any other clash of names is
-- QUEUE_EXISTS (2), and so is an existing queue of that name.
CREATE FUNCTION courier_subscribe_v1(
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

-- Ends the subscription whose queue is p_queue_id, deleting the queue and what it
-- holds; QUEUE_NOT_FOUND (1) when no subscription has that queue.
CREATE FUNCTION courier_unsubscribe_v1(p_queue_id bigint, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
    v_topic_id bigint;
BEGIN
    SELECT s.topic_id INTO v_topic_id FROM courier_subscriptions s WHERE s.queue_id = p_queue_id;
    IF FOUND THEN
        PERFORM courier_lock_topic_v1(v_topic_id, NULL, 'update');
        DELETE FROM courier_subscriptions s WHERE s.queue_id = p_queue_id;
    END IF;
    IF v_topic_id IS NULL OR NOT FOUND THEN
        PERFORM courier_fail_v1(1, format('queue %s is no subscription', p_queue_id));
    END IF;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- Publishes one message to the topic given by id or by name: one copy in every
-- subscription's queue, all or none, through courier_send_v2 (so limits, expiry,
-- delay and dedup ids work as for a send). Without subscriptions nothing is stored
-- and message_ids is empty; the message is still checked. message_ids follow the
-- subscriptions' queue ids, ascending (a retry answered from the dedup window names
-- the queues of the first publish's copies). A subscription whose queue is being deleted
-- at that moment gets no copy (it is gone once this commits).
CREATE FUNCTION courier_publish_v1(
    p_sender_id bigint, p_topic_id bigint, p_topic_name text, p_body bytea,
    p_receiver_id bigint, p_priority integer, p_context bigint, p_max_body_bytes integer,
    p_delay_ms integer, p_ttl_ms integer, p_dedup_id text, p_dedup_window_ms integer,
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
        message_ids := '{}';
    ELSE
        SELECT s.message_ids INTO message_ids FROM courier_send_v2(
            p_sender_id, queue_ids, p_body, p_receiver_id, p_priority, p_context,
            p_max_body_bytes, p_delay_ms, p_ttl_ms, p_dedup_id, p_dedup_window_ms) s;
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

-- Ends the session, as courier_logout_v1, and removes the non-durable subscriptions
-- the client made through that instance (their queues and messages with them).
CREATE FUNCTION courier_logout_v2(p_client_id bigint, p_instance_id bigint, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    DELETE FROM courier_subscriptions s
    WHERE s.instance_id = p_instance_id AND s.subscriber_id = p_client_id;
    PERFORM courier_logout_v1(p_client_id, p_instance_id);
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- == Transactions ===================================================================
-- A transaction is buffered by the client and arrives whole in one COMMIT; this
-- applies its operations in order, all or none, in one call: 'send'
-- (courier_send_v2, its queues the next p_queue_counts[i] of p_queue_ids),
-- 'publish' (courier_publish_v1) and 'ack' (courier_ack_v1). The first operation
-- that fails undoes all of them and is raised with its own status, its message
-- naming the operation (numbered from 1). One row per operation, in order: the ids
-- it stored (none for an ack). Statuses as in the header, 50 TRANSACTION_EXPIRED
-- being the middleware's own (it refuses an old transaction before calling this).
CREATE FUNCTION courier_commit_v1(
    p_client_id bigint, p_kinds text[], p_queue_counts integer[], p_queue_ids bigint[],
    p_topic_ids bigint[], p_topic_names text[], p_bodies bytea[], p_receivers bigint[],
    p_priorities integer[], p_contexts bigint[], p_delays integer[], p_ttls integer[],
    p_dedup_ids text[], p_deliveries bigint[], p_max_body_bytes integer,
    p_dedup_window_ms integer)
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
            SELECT s.message_ids INTO v_ids FROM courier_send_v2(
                p_client_id, p_queue_ids[v_from : v_from + p_queue_counts[v_at] - 1],
                p_bodies[v_at], p_receivers[v_at], p_priorities[v_at], p_contexts[v_at],
                p_max_body_bytes, p_delays[v_at], p_ttls[v_at], p_dedup_ids[v_at],
                p_dedup_window_ms) s;
            v_from := v_from + p_queue_counts[v_at];
        ELSIF p_kinds[v_at] = 'publish' THEN
            SELECT p.message_ids INTO v_ids FROM courier_publish_v1(
                p_client_id, p_topic_ids[v_at], p_topic_names[v_at], p_bodies[v_at],
                p_receivers[v_at], p_priorities[v_at], p_contexts[v_at], p_max_body_bytes,
                p_delays[v_at], p_ttls[v_at], p_dedup_ids[v_at], p_dedup_window_ms) p;
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
