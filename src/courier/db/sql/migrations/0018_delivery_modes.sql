-- Migration 0018: delivery modes. A message sent with persistent false skips the
-- write-ahead log. courier_messages becomes a table partitioned by persistence: the
-- persistent partition logged as before, the non-persistent one UNLOGGED (faster to
-- write, emptied by crash recovery). Reads name the parent, so a pop takes the best
-- message of both kinds. Held messages keep their persistence in a new column. The
-- helpers that move a message between tables carry it (replaced in place); the send
-- functions get new versions that take it, beside the old ones, which store
-- persistent messages as before.

-- The table's rows wait in a temporary copy while the partitioned table takes its
-- name (and the names of its constraints, indexes and sequence); what depends on the
-- old table's row type is dropped first and created again after.
CREATE TEMPORARY TABLE moved_messages ON COMMIT DROP AS
SELECT m.*, s.last_value, s.is_called
FROM courier_messages m
RIGHT JOIN courier_messages_id_seq s ON true;
DROP VIEW courier_console_messages_v1;
DROP FUNCTION courier_lease_v1(courier_messages, integer, bigint, bigint);
DROP FUNCTION courier_expire_v1(courier_messages);
DROP TABLE courier_messages;

-- Messages ready to be read, in two partitions by persistence: a persistent message
-- is written to the write-ahead log like any row; a non-persistent one lives in an
-- UNLOGGED partition, which costs no log writes and is emptied by crash recovery.
-- Reads name the parent, so one index walk (a merge of both partitions' indexes)
-- takes the best message of either kind.
CREATE TABLE courier_messages (
    id          bigint GENERATED ALWAYS AS IDENTITY,
    queue_id    bigint      NOT NULL REFERENCES courier_queues (id) ON DELETE CASCADE,
    sender_id   bigint      NOT NULL REFERENCES courier_clients (id),
    -- The one client allowed to read it; NULL means anyone. Need not exist.
    receiver_id bigint      CHECK (receiver_id > 0),
    -- Who may read it as one indexable value: 0 for anyone, else the receiver. A read
    -- probes audience 0 and audience = reader, each in index order.
    audience    bigint      GENERATED ALWAYS AS (coalesce(receiver_id, 0)) STORED,
    context     bigint,
    priority    smallint    NOT NULL CHECK (priority BETWEEN 1 AND 10),
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- Bytes, stored exactly (NUL and any non-UTF-8 byte included).
    body        bytea       NOT NULL,
    -- How often it was leased, when it expires (NULL: never), and for a dead letter
    -- the queue it failed in and the last reason given.
    deliveries  integer     NOT NULL DEFAULT 0,
    expires_at  timestamptz,
    dead_from   bigint,
    failure     text,
    -- The sender's properties, text keys to text values (NULL: none; migration 0014).
    properties  jsonb,
    -- false: a non-persistent message, kept out of the write-ahead log (migration 0018).
    persistent  boolean     NOT NULL DEFAULT true,
    PRIMARY KEY (id, persistent)
) PARTITION BY LIST (persistent);

-- The hot partitions churn: every message is inserted once and deleted once. Vacuum
-- them after a fixed number of dead rows rather than a fraction of a (tiny) live
-- table, so dead rows never pile up beside the few live ones.
CREATE TABLE courier_messages_persistent PARTITION OF courier_messages
    FOR VALUES IN (true) WITH (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 2000,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 2000,
    autovacuum_vacuum_cost_delay = 0
);
CREATE UNLOGGED TABLE courier_messages_volatile PARTITION OF courier_messages
    FOR VALUES IN (false) WITH (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 2000,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 2000,
    autovacuum_vacuum_cost_delay = 0
);

CREATE INDEX courier_messages_queue_time
    ON courier_messages (queue_id, audience, created_at, id);
CREATE INDEX courier_messages_queue_priority
    ON courier_messages (queue_id, audience, priority DESC, created_at, id);
CREATE INDEX courier_messages_sender_time
    ON courier_messages (sender_id, audience, created_at, id);
CREATE INDEX courier_messages_sender_priority
    ON courier_messages (sender_id, audience, priority DESC, created_at, id);
CREATE INDEX courier_messages_queue_sender_time
    ON courier_messages (queue_id, sender_id, audience, created_at, id);
CREATE INDEX courier_messages_queue_sender_priority
    ON courier_messages (queue_id, sender_id, audience, priority DESC, created_at, id);
CREATE INDEX courier_messages_response
    ON courier_messages (queue_id, receiver_id, context, created_at, id)
    WHERE context IS NOT NULL;
CREATE INDEX courier_messages_expiry ON courier_messages (expires_at)
    WHERE expires_at IS NOT NULL;
CREATE INDEX courier_messages_console_queue
    ON courier_messages (queue_id, id)
    INCLUDE (sender_id, receiver_id, priority, created_at);
CREATE INDEX courier_messages_console_sender
    ON courier_messages (sender_id, id);
CREATE INDEX courier_messages_console_receiver
    ON courier_messages (receiver_id, id)
    WHERE receiver_id IS NOT NULL;

SELECT setval('courier_messages_id_seq', t.last_value, t.is_called)
FROM moved_messages t LIMIT 1;
INSERT INTO courier_messages
    (id, queue_id, sender_id, receiver_id, context, priority, created_at, body, deliveries,
    expires_at, dead_from, failure, properties)
OVERRIDING SYSTEM VALUE
SELECT id, queue_id, sender_id, receiver_id, context, priority, created_at, body, deliveries,
    expires_at, dead_from, failure, properties
FROM moved_messages WHERE id IS NOT NULL;

CREATE TRIGGER courier_messages_notify
    AFTER INSERT ON courier_messages
    REFERENCING NEW TABLE AS stored_messages
    FOR EACH STATEMENT EXECUTE FUNCTION courier_notify_messages_v3();

CREATE VIEW courier_console_messages_v1 AS
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

ALTER TABLE courier_held_messages ADD COLUMN persistent boolean NOT NULL DEFAULT true;

-- Helpers that move a message between tables keep its persistence.
CREATE FUNCTION courier_lease_v1(
    p_message courier_messages, p_lease_ms integer, p_holder_id bigint, p_instance_id bigint,
    OUT delivery_id bigint, OUT deliveries integer)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    INSERT INTO courier_held_messages
        (id, queue_id, sender_id, receiver_id, context, priority, created_at, body,
         deliveries, expires_at, dead_from, failure, visible_at, delivery_id, holder_id,
         instance_id, properties, persistent)
    VALUES ((p_message).id, (p_message).queue_id, (p_message).sender_id,
            (p_message).receiver_id, (p_message).context, (p_message).priority,
            (p_message).created_at, (p_message).body, (p_message).deliveries + 1,
            (p_message).expires_at, (p_message).dead_from, (p_message).failure,
            clock_timestamp() + make_interval(secs => p_lease_ms / 1000.0),
            nextval('courier_delivery_ids'), p_holder_id, p_instance_id, (p_message).properties,
            (p_message).persistent)
    RETURNING courier_held_messages.delivery_id, courier_held_messages.deliveries
    INTO delivery_id, deliveries;
END;
$$;

CREATE FUNCTION courier_expire_v1(p_message courier_messages)
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
         deliveries, dead_from, failure, properties, persistent)
    OVERRIDING SYSTEM VALUE
    VALUES ((p_message).id, v_queue.dead_letter_queue_id, (p_message).sender_id,
            (p_message).receiver_id, (p_message).context, (p_message).priority,
            (p_message).created_at, (p_message).body, (p_message).deliveries,
            (p_message).queue_id, 'expired', (p_message).properties, (p_message).persistent);
    RETURN 'dead';
END;
$$;

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
             deliveries, dead_from, failure, properties, persistent)
        OVERRIDING SYSTEM VALUE
        VALUES (v_held.id, v_queue.dead_letter_queue_id, v_held.sender_id, v_held.receiver_id,
                v_held.context, v_held.priority, v_held.created_at, v_held.body,
                v_held.deliveries, v_held.queue_id,
                CASE WHEN v_expired THEN 'expired'
                     ELSE coalesce(p_failure, v_held.failure) END, v_held.properties,
                v_held.persistent);
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
         deliveries, expires_at, dead_from, failure, properties, persistent)
    OVERRIDING SYSTEM VALUE
    VALUES (v_held.id, v_held.queue_id, v_held.sender_id, v_held.receiver_id, v_held.context,
            v_held.priority, v_held.created_at, v_held.body, v_held.deliveries,
            v_held.expires_at, v_held.dead_from, coalesce(p_failure, v_held.failure),
            v_held.properties, v_held.persistent);
    RETURN 'visible';
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
             deliveries, expires_at, failure, properties, persistent)
        OVERRIDING SYSTEM VALUE
        SELECT t.id, t.dead_from, t.sender_id, t.receiver_id, t.context, t.priority,
               t.created_at, t.body, 0, NULL, t.failure, t.properties, t.persistent
        FROM taken t
        RETURNING 1
    )
    SELECT count(*) INTO moved FROM returned;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

CREATE OR REPLACE FUNCTION courier_restore_v1(
    p_id bigint, p_queue_id bigint, p_sender_id bigint, p_receiver_id bigint,
    p_context bigint, p_priority integer, p_created_at timestamptz, p_body bytea,
    p_deliveries integer, p_dead_from bigint, p_failure text, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    INSERT INTO courier_messages
        (id, queue_id, sender_id, receiver_id, context, priority, created_at, body,
         deliveries, dead_from, failure)
    OVERRIDING SYSTEM VALUE
    SELECT p_id, q.id, p_sender_id, p_receiver_id, p_context, p_priority, p_created_at,
           p_body, p_deliveries, p_dead_from, p_failure
    FROM courier_queues q WHERE q.id = p_queue_id FOR KEY SHARE
    ON CONFLICT (id, persistent) DO NOTHING;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

CREATE OR REPLACE FUNCTION courier_restore_v2(
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
    ON CONFLICT (id, persistent) DO NOTHING;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- == Delivery modes (migration 0018) ================================================
-- A message sent with persistent false skips the write-ahead log: it is stored in
-- courier_messages_volatile, the UNLOGGED partition of courier_messages, faster to
-- write and lost (emptied) by a database crash. While it is held (leased or delayed)
-- it waits in courier_held_messages, which is logged, and goes back to its own
-- partition. The functions below take the flag (NULL: persistent); the versions
-- before them go on storing persistent messages only.

-- One send with options or properties, as courier_send_v4 takes it.
CREATE TYPE courier_option_send_v3 AS (
    request integer, sender_id bigint, queue_ids bigint[], body bytea, receiver_id bigint,
    priority integer, context bigint, delay_ms integer, ttl_ms integer, dedup_id text,
    properties jsonb, persistent boolean);

-- A batch send as courier_send_many_v3 takes it.
CREATE TYPE courier_send_group_v3 AS (
    request integer, sender_id bigint, queue_ids bigint[], bodies bytea[],
    receivers bigint[], priorities integer[], contexts bigint[], delays integer[],
    ttls integer[], dedup_ids text[], properties jsonb[], persistent boolean[]);

-- courier_send_v3 with p_persistent.
CREATE FUNCTION courier_send_v4(
    p_sender_id bigint, p_queue_ids bigint[], p_body bytea, p_receiver_id bigint,
    p_priority integer, p_context bigint, p_max_body_bytes integer,
    p_delay_ms integer, p_ttl_ms integer, p_dedup_id text, p_dedup_window_ms integer,
    p_properties jsonb, p_persistent boolean, OUT message_ids bigint[], OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
    v_mode text;
    v_size integer := octet_length(p_body);
    v_found bigint;
    v_now timestamptz := clock_timestamp();
    v_limited bigint[];
    v_closed bigint;  -- a queue whose send list leaves the sender out
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
    IF p_dedup_id IS NOT NULL AND NOT coalesce(p_persistent, true) THEN
        -- The dedup id is logged and the message not: after a crash a retry would be
        -- answered with the ids of a message that is gone.
        PERFORM courier_fail_v1(10, 'a dedup id needs a persistent message (a database crash'
                                    ' would lose the message and keep its dedup id)');
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
    -- look finds the queues with a limit, and those whose send list leaves the sender
    -- out.
    SELECT count(*), array_agg(l.id ORDER BY l.id) FILTER (WHERE l.limited),
           min(l.id) FILTER (WHERE l.closed)
    INTO v_found, v_limited, v_closed FROM (
        SELECT q.id, (q.max_messages IS NOT NULL OR q.max_bytes IS NOT NULL) AS limited,
               (q.senders IS NOT NULL AND NOT p_sender_id = ANY (q.senders)
                AND q.created_by IS DISTINCT FROM p_sender_id) AS closed
        FROM courier_queues q WHERE q.id = ANY (p_queue_ids) FOR KEY SHARE
    ) l;
    IF v_found <> cardinality(p_queue_ids) THEN
        PERFORM courier_fail_v1(1, format('queue %s does not exist', (
            SELECT string_agg(w.id::text, ', ') FROM unnest(p_queue_ids) w(id)
            WHERE NOT EXISTS (SELECT 1 FROM courier_queues q WHERE q.id = w.id))));
    END IF;
    IF v_closed IS NOT NULL AND NOT courier_is_admin_v1(p_sender_id) THEN
        PERFORM courier_fail_v1(13, format(
            'client %s may not send to queue %s (not on its send list)', p_sender_id, v_closed));
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
             deliveries, expires_at, visible_at, properties, persistent)
        SELECT message_ids[w.ord], w.queue_id, p_sender_id, p_receiver_id, p_context,
               p_priority, v_now, p_body, 0,
               v_now + make_interval(secs => p_ttl_ms / 1000.0),
               v_now + make_interval(secs => p_delay_ms / 1000.0), p_properties,
               coalesce(p_persistent, true)
        FROM unnest(p_queue_ids) WITH ORDINALITY AS w(queue_id, ord);
    ELSE
        INSERT INTO courier_messages
            (id, queue_id, sender_id, receiver_id, context, priority, created_at, body,
             expires_at, properties, persistent)
        OVERRIDING SYSTEM VALUE
        SELECT message_ids[w.ord], w.queue_id, p_sender_id, p_receiver_id, p_context,
               p_priority, v_now, p_body, v_now + make_interval(secs => p_ttl_ms / 1000.0),
               p_properties, coalesce(p_persistent, true)
        FROM unnest(p_queue_ids) WITH ORDINALITY AS w(queue_id, ord)
        ORDER BY w.ord;
    END IF;
    IF v_limited IS NOT NULL THEN
        PERFORM courier_trim_v1(v_limited);
    END IF;
    IF p_dedup_id IS NOT NULL THEN
        UPDATE courier_dedup d SET message_ids = courier_send_v4.message_ids
        WHERE d.sender_id = p_sender_id AND d.dedup_id = p_dedup_id;
    END IF;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- courier_send_batch_v2 with p_persistent, one per request.
CREATE FUNCTION courier_send_batch_v3(
    p_senders bigint[], p_bodies bytea[], p_receivers bigint[], p_priorities integer[],
    p_contexts bigint[], p_persistent boolean[], p_copy_requests integer[], p_copy_queues bigint[],
    p_max_body_bytes integer)
RETURNS TABLE (request integer, status smallint, message text, message_ids bigint[],
               exec_ns bigint)
LANGUAGE plpgsql
-- Plan once: custom plans of these statements cost more than running them.
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
    v_limited bigint[];
    v_guarded boolean;   -- some queue named has a send list
    v_refused integer[];  -- requests refused by a send list, and the queue refusing
    v_refusing bigint[];
BEGIN
    -- Key-share locks keep the queues from being deleted before the insert; the same
    -- look finds the queues with a limit, and whether any has a send list.
    SELECT array_agg(l.id ORDER BY l.id) FILTER (WHERE l.limited), bool_or(l.guarded)
    INTO v_limited, v_guarded FROM (
        SELECT q.id, (q.max_messages IS NOT NULL OR q.max_bytes IS NOT NULL) AS limited,
               q.senders IS NOT NULL AS guarded
        FROM courier_queues q WHERE q.id = ANY (p_copy_queues) FOR KEY SHARE
    ) l;
    -- Only then are the send lists looked at: the requests they refuse, with the
    -- first queue refusing each (migration 0017).
    IF v_guarded THEN
        SELECT array_agg(k.request), array_agg(k.queue_id) INTO v_refused, v_refusing FROM (
            SELECT c.request, min(c.queue_id) AS queue_id
            FROM unnest(p_copy_requests, p_copy_queues) c(request, queue_id)
            JOIN courier_queues q ON q.id = c.queue_id
            WHERE q.senders IS NOT NULL
              AND NOT courier_allows_v1(p_senders[c.request], q.created_by, q.senders)
            GROUP BY c.request
        ) k;
    END IF;
    IF v_limited IS NOT NULL THEN
        PERFORM courier_lock_limited_v1(v_limited);
    END IF;
    RETURN QUERY
    WITH requests AS (
        SELECT r.n::integer AS n, r.sender, r.body, r.receiver, r.priority, r.context,
               coalesce(r.persistent, true) AS persistent
        FROM unnest(p_senders, p_bodies, p_receivers, p_priorities, p_contexts, p_persistent)
             WITH ORDINALITY AS r(sender, body, receiver, priority, context, persistent, n)
    ), copies AS (
        SELECT c.request, c.queue_id, c.ord
        FROM unnest(p_copy_requests, p_copy_queues) WITH ORDINALITY AS c(request, queue_id, ord)
    ), per_request AS (
        -- Lookups are index probes per request (not joins a generic plan might turn
        -- into scans of whole tables).
        SELECT c.request, count(*) AS queues, count(DISTINCT c.queue_id) AS distinct_queues,
               min(c.queue_id) FILTER (
                   WHERE NOT EXISTS (SELECT FROM courier_queues q WHERE q.id = c.queue_id)
               ) AS missing_queue
        FROM copies c
        GROUP BY c.request
    ), valid_otherwise AS (
        SELECT r.*, p.missing_queue, CASE
            WHEN r.body IS NULL OR p_max_body_bytes IS NULL THEN 1
            WHEN octet_length(r.body) > p_max_body_bytes THEN 2
            WHEN r.priority IS NULL OR r.priority NOT BETWEEN 1 AND 10 THEN 3
            WHEN r.receiver <= 0 THEN 4
            WHEN p.request IS NULL THEN 5
            WHEN p.queues <> p.distinct_queues THEN 6
            WHEN s.mode IS NULL THEN 7
            WHEN s.mode <> 'read_write' THEN 8
            WHEN p.missing_queue IS NOT NULL THEN 9
            WHEN r.n = ANY (v_refused) THEN 11
            ELSE 0 END AS failure
        FROM requests r
        LEFT JOIN per_request p ON p.request = r.n
        LEFT JOIN LATERAL (
            SELECT c.mode FROM courier_clients c WHERE c.id = r.sender
        ) s ON true
    ), room AS (
        -- The refusing queues with a limit, and what they can still take.
        SELECT l.queue_id, l.messages_left, l.bytes_left
        FROM courier_room_v1(v_limited) l
    ), beyond AS (
        -- Requests with a copy past its queue's room, the copies of the requests that
        -- pass every other check counted in batch order.
        SELECT DISTINCT u.request FROM (
            SELECT c.request, m.messages_left, m.bytes_left,
                   count(*) OVER w AS messages, sum(octet_length(k.body)) OVER w AS bytes
            FROM copies c JOIN room m ON m.queue_id = c.queue_id
            JOIN valid_otherwise k ON k.n = c.request AND k.failure = 0
            WINDOW w AS (PARTITION BY c.queue_id ORDER BY c.ord)
        ) u
        WHERE u.messages > u.messages_left OR u.bytes > u.bytes_left
        UNION
        -- A body larger than a queue's byte limit, which no queue could keep.
        SELECT c.request FROM copies c
        JOIN courier_queues q ON q.id = c.queue_id AND q.id = ANY (v_limited)
        JOIN valid_otherwise k ON k.n = c.request AND k.failure = 0
        WHERE octet_length(k.body) > q.max_bytes
    ), checked AS (
        SELECT k.n, k.sender, k.body, k.receiver, k.priority, k.context, k.persistent,
               k.missing_queue,
               CASE WHEN k.failure = 0 AND k.n IN (SELECT b.request FROM beyond b) THEN 10
                    ELSE k.failure END AS failure
        FROM valid_otherwise k
    ), answered AS (
        SELECT k.*, coalesce((ARRAY[10, 12, 11, 10, 10, 10, 6, 13, 1, 18, 13])[k.failure], 0)::smallint
                    AS status,
               CASE k.failure
                   WHEN 0 THEN NULL
                   WHEN 1 THEN 'a message needs a body and a size limit'
                   WHEN 2 THEN format('message body is %s bytes; the limit is %s',
                                      octet_length(k.body), p_max_body_bytes)
                   WHEN 3 THEN format('priority %s is not from 1 to 10', k.priority)
                   WHEN 4 THEN 'a receiver is a positive client id'
                   WHEN 5 THEN 'a message needs at least one queue'
                   WHEN 6 THEN 'a queue is listed twice'
                   WHEN 7 THEN format('no client %s', k.sender)
                   WHEN 8 THEN format('client %s is read-only', k.sender)
                   WHEN 9 THEN format('queue %s does not exist', k.missing_queue)
                   WHEN 11 THEN format('client %s may not send to queue %s (not on its send list)',
                                       k.sender, v_refusing[array_position(v_refused, k.n)])
                   ELSE 'a queue it names is full (its limit refuses new messages)'
               END AS message
        FROM checked k
    ), valid AS (
        -- Ids are drawn in copy order, so a batch keeps its order in time.
        SELECT c.ord, c.request, c.queue_id, k.sender, k.receiver, k.context, k.priority,
               k.body, k.persistent, nextval('courier_messages_id_seq') AS id
        FROM copies c JOIN answered k ON k.n = c.request AND k.status = 0
        ORDER BY c.ord
    ), stored AS (
        INSERT INTO courier_messages
            (id, queue_id, sender_id, receiver_id, context, priority, body, persistent)
        OVERRIDING SYSTEM VALUE
        SELECT v.id, v.queue_id, v.sender, v.receiver, v.context, v.priority, v.body,
               v.persistent
        FROM valid v ORDER BY v.ord
    )
    SELECT k.n, k.status, k.message, v.ids, courier_elapsed_ns_v1(v_started)
    FROM answered k
    LEFT JOIN (SELECT va.request, array_agg(va.id ORDER BY va.ord) AS ids
               FROM valid va GROUP BY va.request) v ON v.request = k.n
    ORDER BY k.n;
    IF v_limited IS NOT NULL THEN
        PERFORM courier_trim_v1(v_limited);
    END IF;
END;
$$;

-- courier_send_each_v1 with p_persistent, one per message.
CREATE FUNCTION courier_send_each_v2(
    p_sender_id bigint, p_queue_ids bigint[], p_bodies bytea[], p_receivers bigint[],
    p_priorities integer[], p_contexts bigint[], p_delays integer[], p_ttls integer[],
    p_dedup_ids text[], p_properties jsonb[], p_persistent boolean[],
    p_max_body_bytes integer,
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
            FROM courier_send_v4(p_sender_id, p_queue_ids, p_bodies[v_i], p_receivers[v_i],
                                 p_priorities[v_i], p_contexts[v_i], p_max_body_bytes,
                                 coalesce(p_delays[v_i], 0), p_ttls[v_i], p_dedup_ids[v_i],
                                 p_dedup_window_ms, p_properties[v_i],
                                 p_persistent[v_i]) s;
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

-- courier_send_many_v2 with p_persistent, one per message.
CREATE FUNCTION courier_send_many_v3(
    p_sender_id bigint, p_queue_ids bigint[], p_bodies bytea[], p_receivers bigint[],
    p_priorities integer[], p_contexts bigint[], p_delays integer[], p_ttls integer[],
    p_dedup_ids text[], p_properties jsonb[], p_persistent boolean[],
    p_max_body_bytes integer,
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
       OR coalesce(cardinality(p_properties), 0) <> v_count
       OR coalesce(cardinality(p_persistent), 0) <> v_count THEN
        PERFORM courier_fail_v1(10, 'every field of a batch has one value per message');
    END IF;
    IF EXISTS (SELECT FROM generate_subscripts(p_bodies, 1) k
               WHERE coalesce(p_delays[k], 0) <> 0 OR p_ttls[k] IS NOT NULL
                     OR p_dedup_ids[k] IS NOT NULL) THEN
        RETURN QUERY SELECT * FROM courier_send_each_v2(
            p_sender_id, p_queue_ids, p_bodies, p_receivers, p_priorities, p_contexts, p_delays,
            p_ttls, p_dedup_ids, p_properties, p_persistent, p_max_body_bytes,
            p_dedup_window_ms, v_started);
        RETURN;
    END IF;
    -- Properties and persistence ride along on the one-statement path; a batch with
    -- properties or non-persistent messages that needs the general path goes one
    -- message at a time, as one with options does.
    v_with_properties := EXISTS (SELECT FROM unnest(p_properties) p WHERE p IS NOT NULL)
                         OR false = ANY (p_persistent);
    IF coalesce(cardinality(p_queue_ids), 0) = 0 THEN
        PERFORM courier_fail_v1(10, 'message 1 of the batch: a message needs at least one queue');
    END IF;
    -- Key-share locks keep the queues from being deleted before the insert; a queue
    -- with a limit takes the general path, which counts its room, and so does one
    -- with a send list, which the general path checks.
    SELECT count(*), bool_or(q.max_messages IS NOT NULL OR q.max_bytes IS NOT NULL
                             OR q.senders IS NOT NULL)
    INTO v_found, v_limited
    FROM (SELECT q.max_messages, q.max_bytes, q.senders FROM courier_queues q
          WHERE q.id = ANY (p_queue_ids) FOR KEY SHARE) q;
    IF v_limited OR v_found < cardinality(p_queue_ids) THEN
        IF v_with_properties THEN
            RETURN QUERY SELECT * FROM courier_send_each_v2(
                p_sender_id, p_queue_ids, p_bodies, p_receivers, p_priorities, p_contexts, p_delays,
                p_ttls, p_dedup_ids, p_properties, p_persistent, p_max_body_bytes,
                p_dedup_window_ms, v_started);
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
            RETURN QUERY SELECT * FROM courier_send_each_v2(
                p_sender_id, p_queue_ids, p_bodies, p_receivers, p_priorities, p_contexts, p_delays,
                p_ttls, p_dedup_ids, p_properties, p_persistent, p_max_body_bytes,
                p_dedup_window_ms, v_started);
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
            RETURN QUERY SELECT * FROM courier_send_each_v2(
                p_sender_id, p_queue_ids, p_bodies, p_receivers, p_priorities, p_contexts, p_delays,
                p_ttls, p_dedup_ids, p_properties, p_persistent, p_max_body_bytes,
                p_dedup_window_ms, v_started);
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
               m.properties, coalesce(m.persistent, true) AS persistent,
               nextval('courier_messages_id_seq') AS id
        FROM unnest(p_bodies, p_receivers, p_priorities, p_contexts, p_properties, p_persistent)
                 WITH ORDINALITY m(body, receiver, priority, context, properties, persistent, n)
        CROSS JOIN unnest(p_queue_ids) WITH ORDINALITY q(queue_id, ord)
        ORDER BY m.n, q.ord
    ), stored AS (
        INSERT INTO courier_messages
            (id, queue_id, sender_id, receiver_id, context, priority, body, properties,
             persistent)
        OVERRIDING SYSTEM VALUE
        SELECT d.id, d.queue_id, p_sender_id, d.receiver, d.context, d.priority, d.body,
               d.properties, d.persistent
        FROM drawn d ORDER BY d.n, d.ord
        RETURNING id
    )
    -- Joined to what was stored, so the insert has run when exec_ns is taken.
    SELECT array_agg(d.id ORDER BY d.ord), courier_elapsed_ns_v1(v_started)
    FROM drawn d JOIN stored s ON s.id = d.id GROUP BY d.n ORDER BY d.n;
END;
$$;

-- courier_publish_v2 with p_persistent, for every copy.
CREATE FUNCTION courier_publish_v3(
    p_sender_id bigint, p_topic_id bigint, p_topic_name text, p_body bytea,
    p_receiver_id bigint, p_priority integer, p_context bigint, p_max_body_bytes integer,
    p_delay_ms integer, p_ttl_ms integer, p_dedup_id text, p_dedup_window_ms integer,
    p_properties jsonb, p_persistent boolean,
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
        IF p_dedup_id IS NOT NULL AND NOT coalesce(p_persistent, true) THEN
            PERFORM courier_fail_v1(10, 'a dedup id needs a persistent message (a database'
                                        ' crash would lose the message and keep its dedup id)');
        END IF;
        message_ids := '{}';
    ELSE
        SELECT s.message_ids INTO message_ids FROM courier_send_v4(
            p_sender_id, queue_ids, p_body, p_receiver_id, p_priority, p_context,
            p_max_body_bytes, p_delay_ms, p_ttl_ms, p_dedup_id, p_dedup_window_ms,
            p_properties, p_persistent) s;
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

-- courier_commit_v2 with p_persistent, one per operation (ignored for an ack).
CREATE FUNCTION courier_commit_v3(
    p_client_id bigint, p_kinds text[], p_queue_counts integer[], p_queue_ids bigint[],
    p_topic_ids bigint[], p_topic_names text[], p_bodies bytea[], p_receivers bigint[],
    p_priorities integer[], p_contexts bigint[], p_delays integer[], p_ttls integer[],
    p_dedup_ids text[], p_deliveries bigint[], p_properties jsonb[], p_persistent boolean[],
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
            SELECT s.message_ids INTO v_ids FROM courier_send_v4(
                p_client_id, p_queue_ids[v_from : v_from + p_queue_counts[v_at] - 1],
                p_bodies[v_at], p_receivers[v_at], p_priorities[v_at], p_contexts[v_at],
                p_max_body_bytes, p_delays[v_at], p_ttls[v_at], p_dedup_ids[v_at],
                p_dedup_window_ms, p_properties[v_at], p_persistent[v_at]) s;
            v_from := v_from + p_queue_counts[v_at];
        ELSIF p_kinds[v_at] = 'publish' THEN
            SELECT p.message_ids INTO v_ids FROM courier_publish_v3(
                p_client_id, p_topic_ids[v_at], p_topic_names[v_at], p_bodies[v_at],
                p_receivers[v_at], p_priorities[v_at], p_contexts[v_at], p_max_body_bytes,
                p_delays[v_at], p_ttls[v_at], p_dedup_ids[v_at], p_dedup_window_ms,
                p_properties[v_at], p_persistent[v_at]) p;
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

-- courier_exchange_v5 with p_persistent, one per plain send, and the persistence
-- of option sends and batch sends in their types.
CREATE FUNCTION courier_exchange_v6(
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
    p_send_groups courier_send_group_v3[], p_pop_groups courier_pop_group_v1[])
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
    v_send courier_option_send_v3;
    v_group courier_send_group_v3;
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
        FROM courier_send_batch_v3(p_senders, p_bodies, p_receivers, p_priorities, p_contexts,
                                   p_persistent, p_copy_sends, p_copy_queues, p_max_body_bytes) s;
    END IF;
    FOREACH v_send IN ARRAY coalesce(p_option_sends, '{}') LOOP
        BEGIN
            RETURN QUERY
            SELECT v_send.request, 0::smallint, NULL::text, s.message_ids, NULL::bigint,
                   NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::smallint,
                   NULL::timestamptz, NULL::bytea, NULL::integer, NULL::bigint,
                   NULL::bigint, NULL::text, NULL::jsonb, s.exec_ns
            FROM courier_send_v4(v_send.sender_id, v_send.queue_ids, v_send.body,
                                 v_send.receiver_id, v_send.priority, v_send.context,
                                 p_max_body_bytes, v_send.delay_ms, v_send.ttl_ms,
                                 v_send.dedup_id, p_dedup_window_ms, v_send.properties,
                                 v_send.persistent) s;
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
            FROM courier_send_many_v3(v_group.sender_id, v_group.queue_ids, v_group.bodies,
                                      v_group.receivers, v_group.priorities, v_group.contexts,
                                      v_group.delays, v_group.ttls, v_group.dedup_ids,
                                      v_group.properties, v_group.persistent,
                                      p_max_body_bytes,
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
