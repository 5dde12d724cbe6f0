-- == Moving messages between nodes, exactly once (migration 0023) ===================
-- Members of a replicated queue even out their lengths by moving messages from one
-- node to another, in two steps joined by a transfer id:
--   1. on the source node, one transaction deletes the messages from their queue
--      and keeps them in courier_outbox (transfer_out);
--   2. on the target node, one transaction records the transfer id in
--      courier_transfers_received and inserts the messages, with their ids, times,
--      priorities and delivery counts (transfer_in); a transfer id seen before
--      inserts nothing;
--   3. on the source node the outbox rows go (transfer_done).
-- A mover that stops anywhere leaves each message in exactly one place a consumer
-- can see (its queue, or the target's) or in the outbox, which no read looks at;
-- the next mover finishes what is in an outbox (step 2 again, then 3), or puts the
-- messages back where they came from when the target queue is gone (transfer_back).
-- Leased and delayed messages (courier_held_messages) are never moved.

CREATE TABLE courier_outbox (
    transfer_id     bigint      NOT NULL,
    source_queue_id bigint      NOT NULL,
    target_queue_id bigint      NOT NULL,
    id              bigint      NOT NULL,
    sender_id       bigint      NOT NULL,
    receiver_id     bigint,
    context         bigint,
    priority        smallint    NOT NULL,
    created_at      timestamptz NOT NULL,
    body            bytea       NOT NULL,
    deliveries      integer     NOT NULL,
    expires_at      timestamptz,
    dead_from       bigint,
    failure         text,
    properties      jsonb,
    persistent      boolean     NOT NULL,
    PRIMARY KEY (transfer_id, id)
);

CREATE TABLE courier_transfers_received (
    transfer_id bigint      PRIMARY KEY,
    received_at timestamptz NOT NULL DEFAULT now()
);

-- Step 1: up to p_count of the oldest visible messages for anyone into the outbox
-- (rows other readers hold are skipped; a message for one receiver, such as a reply
-- its requester waits for in this queue, stays); the rows moved, oldest first.
CREATE FUNCTION courier_transfer_out_v1(
    p_transfer_id bigint, p_source_queue_id bigint, p_target_queue_id bigint, p_count integer)
RETURNS SETOF courier_outbox
LANGUAGE plpgsql AS $$
BEGIN
    WITH taken AS (
        SELECT m.id, m.persistent FROM courier_messages m
        WHERE m.queue_id = p_source_queue_id AND m.receiver_id IS NULL
        ORDER BY m.created_at, m.id
        LIMIT p_count
        FOR UPDATE SKIP LOCKED
    ), moved AS (
        DELETE FROM courier_messages m USING taken t
        WHERE m.id = t.id AND m.persistent = t.persistent
        RETURNING m.*
    )
    INSERT INTO courier_outbox (
        transfer_id, source_queue_id, target_queue_id, id, sender_id, receiver_id, context,
        priority, created_at, body, deliveries, expires_at, dead_from, failure, properties,
        persistent)
    SELECT p_transfer_id, p_source_queue_id, p_target_queue_id, m.id, m.sender_id,
           m.receiver_id, m.context, m.priority, m.created_at, m.body, m.deliveries,
           m.expires_at, m.dead_from, m.failure, m.properties, m.persistent
    FROM moved m;
    RETURN QUERY
    SELECT * FROM courier_outbox o WHERE o.transfer_id = p_transfer_id ORDER BY o.created_at, o.id;
END;
$$;

-- A member being removed: every visible message (addressed ones too) into the outbox
-- for the target, and the queue itself deleted in the same transaction when nothing
-- of it is leased or delayed any more; the lock on its row waits for sends in
-- flight and makes later ones fail with QUEUE_NOT_FOUND (their clients join again).
CREATE FUNCTION courier_drain_queue_v1(
    p_transfer_id bigint, p_source_queue_id bigint, p_target_queue_id bigint,
    OUT moved integer, OUT dropped boolean, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    PERFORM FROM courier_queues q WHERE q.id = p_source_queue_id FOR UPDATE;
    IF NOT FOUND THEN
        moved := 0;
        dropped := true;
        exec_ns := courier_elapsed_ns_v1(v_started);
        RETURN;
    END IF;
    WITH moved_rows AS (
        DELETE FROM courier_messages m WHERE m.queue_id = p_source_queue_id RETURNING m.*
    )
    INSERT INTO courier_outbox (
        transfer_id, source_queue_id, target_queue_id, id, sender_id, receiver_id, context,
        priority, created_at, body, deliveries, expires_at, dead_from, failure, properties,
        persistent)
    SELECT p_transfer_id, p_source_queue_id, p_target_queue_id, m.id, m.sender_id,
           m.receiver_id, m.context, m.priority, m.created_at, m.body, m.deliveries,
           m.expires_at, m.dead_from, m.failure, m.properties, m.persistent
    FROM moved_rows m;
    GET DIAGNOSTICS moved = ROW_COUNT;
    dropped := NOT EXISTS (SELECT FROM courier_held_messages h WHERE h.queue_id = p_source_queue_id);
    IF dropped THEN
        DELETE FROM courier_queues q WHERE q.id = p_source_queue_id;
    END IF;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- The outbox rows of one transfer, oldest first.
CREATE FUNCTION courier_outbox_rows_v1(p_transfer_id bigint)
RETURNS SETOF courier_outbox
LANGUAGE sql STABLE AS $$
    SELECT * FROM courier_outbox o WHERE o.transfer_id = p_transfer_id ORDER BY o.created_at, o.id
$$;

-- What every unfinished transfer of this node holds, by transfer and age.
CREATE FUNCTION courier_pending_transfers_v1()
RETURNS SETOF courier_outbox
LANGUAGE sql STABLE AS $$
    SELECT * FROM courier_outbox o ORDER BY o.transfer_id, o.created_at, o.id
$$;

-- Step 2, on the target node: the messages of a transfer, once. Returns how many
-- were stored now (0 when the transfer was applied before). QUEUE_NOT_FOUND (1)
-- when the target queue is gone.
CREATE FUNCTION courier_transfer_in_v1(
    p_transfer_id bigint, p_target_queue_id bigint, p_ids bigint[], p_senders bigint[],
    p_receivers bigint[], p_contexts bigint[], p_priorities smallint[],
    p_created timestamptz[], p_bodies bytea[], p_deliveries integer[],
    p_expires timestamptz[], p_dead_from bigint[], p_failures text[], p_properties jsonb[],
    p_persistent boolean[], OUT received integer, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    -- A transfer applied before stays applied, whatever became of its queue since.
    IF EXISTS (SELECT FROM courier_transfers_received r WHERE r.transfer_id = p_transfer_id) THEN
        received := 0;
        exec_ns := courier_elapsed_ns_v1(v_started);
        RETURN;
    END IF;
    PERFORM FROM courier_queues q WHERE q.id = p_target_queue_id FOR KEY SHARE;
    IF NOT FOUND THEN
        PERFORM courier_fail_v1(1, format('queue %s does not exist', p_target_queue_id));
    END IF;
    INSERT INTO courier_transfers_received (transfer_id) VALUES (p_transfer_id)
    ON CONFLICT (transfer_id) DO NOTHING;
    IF NOT FOUND THEN
        received := 0;
    ELSE
        INSERT INTO courier_messages (
            id, queue_id, sender_id, receiver_id, context, priority, created_at, body,
            deliveries, expires_at, dead_from, failure, properties, persistent)
        OVERRIDING SYSTEM VALUE
        SELECT u.id, p_target_queue_id, u.sender_id, u.receiver_id, u.context, u.priority,
               u.created_at, u.body, u.deliveries, u.expires_at, u.dead_from, u.failure,
               u.properties, u.persistent
        FROM unnest(p_ids, p_senders, p_receivers, p_contexts, p_priorities, p_created,
                    p_bodies, p_deliveries, p_expires, p_dead_from, p_failures, p_properties,
                    p_persistent)
             AS u(id, sender_id, receiver_id, context, priority, created_at, body, deliveries,
                  expires_at, dead_from, failure, properties, persistent);
        GET DIAGNOSTICS received = ROW_COUNT;
    END IF;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- Step 3, on the source node: the transfer is done.
CREATE FUNCTION courier_transfer_done_v1(p_transfer_id bigint, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    DELETE FROM courier_outbox o WHERE o.transfer_id = p_transfer_id;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- Instead of step 2 and 3, when the target is gone: the messages go back to their
-- queue (or are dropped with it, if that is gone too). Returns how many went back.
CREATE FUNCTION courier_transfer_back_v1(
    p_transfer_id bigint, OUT returned integer, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    WITH back AS (
        DELETE FROM courier_outbox o WHERE o.transfer_id = p_transfer_id RETURNING o.*
    )
    INSERT INTO courier_messages (
        id, queue_id, sender_id, receiver_id, context, priority, created_at, body,
        deliveries, expires_at, dead_from, failure, properties, persistent)
    OVERRIDING SYSTEM VALUE
    SELECT b.id, b.source_queue_id, b.sender_id, b.receiver_id, b.context, b.priority,
           b.created_at, b.body, b.deliveries, b.expires_at, b.dead_from, b.failure,
           b.properties, b.persistent
    FROM back b JOIN courier_queues q ON q.id = b.source_queue_id;
    GET DIAGNOSTICS returned = ROW_COUNT;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- Transfer ids are kept long enough for any retry of step 2, then forgotten.
CREATE FUNCTION courier_forget_transfers_v1(p_older_than_s double precision, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    DELETE FROM courier_transfers_received r
    WHERE r.received_at < now() - make_interval(secs => p_older_than_s);
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;
