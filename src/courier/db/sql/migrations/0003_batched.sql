-- Migration 0003: the batched data path (docs/architecture.md, "Batching").
-- The whole current schema, documented, is schema.sql.

-- A middleware coalesces the sends that arrive together into one call, and the pops
-- of one queue into another. Each request in a batch gets its own status (the wire
-- status code, 0 for OK) and message: a bad request never fails the others, so these
-- functions check instead of raising.

-- The hot table churns: every message is inserted once and deleted once. Vacuum it
-- after a fixed number of dead rows rather than a fraction of a (tiny) live table, so
-- dead rows never pile up beside the few live ones.
ALTER TABLE courier_messages SET (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 2000,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 2000,
    autovacuum_vacuum_cost_delay = 0
);

-- One notification per distinct (queue, receiver) a statement stored, not per row.
DROP TRIGGER courier_messages_notify ON courier_messages;
DROP FUNCTION courier_notify_message_v1();

CREATE FUNCTION courier_notify_messages_v2()
RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('courier_messages',
                      s.queue_id::text || ':' || coalesce(s.receiver_id::text, ''))
    FROM (SELECT DISTINCT n.queue_id, n.receiver_id FROM stored_messages n) s;
    RETURN NULL;
END;
$$;

CREATE TRIGGER courier_messages_notify
    AFTER INSERT ON courier_messages
    REFERENCING NEW TABLE AS stored_messages
    FOR EACH STATEMENT EXECUTE FUNCTION courier_notify_messages_v2();

-- Stores a batch of sends: request n is (p_senders[n], p_bodies[n], p_receivers[n],
-- p_priorities[n], p_contexts[n]) and has one copy for every i with
-- p_copy_requests[i] = n, in the queue p_copy_queues[i]. Each request is stored whole
-- or not at all; ids come back per request in its queue order, and a batch's
-- messages are stored in request order, so they keep that order in time.
CREATE FUNCTION courier_send_batch_v1(
    p_senders bigint[], p_bodies text[], p_receivers bigint[], p_priorities integer[],
    p_contexts bigint[], p_copy_requests integer[], p_copy_queues bigint[],
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
BEGIN
    -- Key-share locks keep the queues from being deleted before the insert.
    PERFORM FROM courier_queues q WHERE q.id = ANY (p_copy_queues) FOR KEY SHARE;
    RETURN QUERY
    WITH requests AS (
        SELECT r.n::integer AS n, r.sender, r.body, r.receiver, r.priority, r.context
        FROM unnest(p_senders, p_bodies, p_receivers, p_priorities, p_contexts)
             WITH ORDINALITY AS r(sender, body, receiver, priority, context, n)
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
    ), checked AS (
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
            ELSE 0 END AS failure
        FROM requests r
        LEFT JOIN per_request p ON p.request = r.n
        LEFT JOIN LATERAL (
            SELECT c.mode FROM courier_clients c WHERE c.id = r.sender
        ) s ON true
    ), answered AS (
        SELECT k.*, coalesce((ARRAY[10, 12, 11, 10, 10, 10, 6, 13, 1])[k.failure], 0)::smallint
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
                   ELSE format('queue %s does not exist', k.missing_queue)
               END AS message
        FROM checked k
    ), valid AS (
        -- Ids are drawn in copy order, so a batch keeps its order in time.
        SELECT c.ord, c.request, c.queue_id, k.sender, k.receiver, k.context, k.priority,
               k.body, nextval('courier_messages_id_seq') AS id
        FROM copies c JOIN answered k ON k.n = c.request AND k.status = 0
        ORDER BY c.ord
    ), stored AS (
        INSERT INTO courier_messages
            (id, queue_id, sender_id, receiver_id, context, priority, body)
        OVERRIDING SYSTEM VALUE
        SELECT v.id, v.queue_id, v.sender, v.receiver, v.context, v.priority, v.body
        FROM valid v ORDER BY v.ord
    )
    SELECT k.n, k.status, k.message, v.ids, courier_elapsed_ns_v1(v_started)
    FROM answered k
    LEFT JOIN (SELECT va.request, array_agg(va.id ORDER BY va.ord) AS ids
               FROM valid va GROUP BY va.request) v ON v.request = k.n
    ORDER BY k.n;
END;
$$;

-- The first message visible to p_reader_id in one read order, locked (FOR UPDATE SKIP
-- LOCKED), or NULL. The reader sees messages for anyone (audience 0) and its own.
--
-- Every lock is taken by the walk that picks the row, and only on a row this
-- transaction then takes, so a concurrent pop never skips a message that nobody
-- takes. The reader's own head is found without a lock; then one skip-locked walk
-- takes a message for anyone that comes before it, if there is one; else the own
-- head is locked, or, when another pop of the same reader holds it, the next own
-- message is tried. A reader with no message of its own walks the messages for
-- anyone once. The priority order splits "comes before" into two index ranges.
CREATE FUNCTION courier_take_one_v1(p_reader_id bigint, p_queue_id bigint, p_order text)
RETURNS bigint
LANGUAGE plpgsql
-- Plan once: custom plans of these statements cost more than running them.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_tried bigint[] := '{}';  -- own messages held by another pop of this reader
    v_own courier_messages%ROWTYPE;
    v_id bigint;
BEGIN
    LOOP
        IF p_order = 'time' THEN
            SELECT * INTO v_own FROM courier_messages m
            WHERE m.queue_id = p_queue_id AND m.audience = p_reader_id
              AND m.id <> ALL (v_tried)
            ORDER BY m.created_at, m.id LIMIT 1;
            SELECT m.id INTO v_id FROM courier_messages m
            WHERE m.queue_id = p_queue_id AND m.audience = 0
              AND (v_own.id IS NULL OR (m.created_at, m.id) < (v_own.created_at, v_own.id))
            ORDER BY m.created_at, m.id LIMIT 1 FOR UPDATE SKIP LOCKED;
        ELSE
            SELECT * INTO v_own FROM courier_messages m
            WHERE m.queue_id = p_queue_id AND m.audience = p_reader_id
              AND m.id <> ALL (v_tried)
            ORDER BY m.priority DESC, m.created_at, m.id LIMIT 1;
            SELECT m.id INTO v_id FROM courier_messages m
            WHERE m.queue_id = p_queue_id AND m.audience = 0
              AND m.priority > coalesce(v_own.priority, 0)
            ORDER BY m.priority DESC, m.created_at, m.id LIMIT 1 FOR UPDATE SKIP LOCKED;
            IF v_id IS NULL AND v_own.id IS NOT NULL THEN
                SELECT m.id INTO v_id FROM courier_messages m
                WHERE m.queue_id = p_queue_id AND m.audience = 0
                  AND m.priority = v_own.priority
                  AND (m.created_at, m.id) < (v_own.created_at, v_own.id)
                ORDER BY m.created_at, m.id LIMIT 1 FOR UPDATE SKIP LOCKED;
            END IF;
        END IF;
        IF v_id IS NOT NULL OR v_own.id IS NULL THEN
            RETURN v_id;
        END IF;
        SELECT m.id INTO v_id FROM courier_messages m WHERE m.id = v_own.id
        FOR UPDATE SKIP LOCKED;
        IF v_id IS NOT NULL THEN
            RETURN v_id;
        END IF;
        v_tried := v_tried || v_own.id;
    END LOOP;
END;
$$;

-- Pops for a batch of readers of one queue in one order (time or priority): one row
-- per element of p_readers (request = its position), with status 0 and the message,
-- 5 (QUEUE_EMPTY) when nothing visible to that reader is free, or 1
-- (QUEUE_NOT_FOUND) for every request when the queue does not exist.
--
-- Readers with no message of their own in the queue (the common case) share one
-- index walk over the messages for anyone that locks as many free rows as they need
-- and skips those other pops hold; the others pop one by one (courier_take_one_v1).
CREATE FUNCTION courier_pop_batch_v1(p_queue_id bigint, p_order text, p_readers bigint[])
RETURNS TABLE (request integer, status smallint, message text, id bigint, queue_id bigint,
               sender_id bigint, receiver_id bigint, context bigint, priority smallint,
               created_at timestamptz, body text, exec_ns bigint)
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
            NULL::smallint, NULL::timestamptz, NULL::text, 0::bigint
        FROM generate_subscripts(p_readers, 1) r(n);
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT FROM courier_queues q WHERE q.id = p_queue_id) THEN
        RETURN QUERY SELECT r.n::integer, 1::smallint,
            format('queue %s does not exist', p_queue_id),
            NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,
            NULL::smallint, NULL::timestamptz, NULL::text, 0::bigint
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
                      m.context, m.priority, m.created_at, m.body
            INTO request, status, message, id, queue_id, sender_id, receiver_id, context,
                 priority, created_at, body;
            exec_ns := courier_elapsed_ns_v1(v_started);
            RETURN NEXT;
        ELSE
            v_shared := v_shared || v_row.n;  -- answered empty below
        END IF;
    END LOOP;

    status := 5;
    message := NULL;
    id := NULL; queue_id := NULL; sender_id := NULL; receiver_id := NULL; context := NULL;
    priority := NULL; created_at := NULL; body := NULL;
    FOR v_i IN v_next..coalesce(cardinality(v_shared), 0) LOOP
        request := v_shared[v_i];
        exec_ns := courier_elapsed_ns_v1(v_started);
        RETURN NEXT;
    END LOOP;
END;
$$;

-- Peek or pop one visible message: a pop by queue alone takes its row in one
-- skip-locked walk (courier_take_one_v1), other reads pick it (courier_pick_v1). status is 0 with the message, 5 (QUEUE_EMPTY)
-- when a queue was given and holds nothing visible, 4 (NO_MESSAGE) for a sender-only
-- read that found none.
--
-- A peek picks its message without a lock, so a concurrent pop may delete it before
-- the peek fetches it; the peek then picks again (each statement sees the latest
-- commits). Every lost race means another reader took a message, so a peek loses
-- more than 100 times in a row only to a flood of pops; it then fails (INTERNAL)
-- rather than answer with an empty row.
CREATE OR REPLACE FUNCTION courier_read_v1(
    p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text, p_pop boolean,
    OUT status smallint, OUT id bigint, OUT queue_id bigint, OUT sender_id bigint,
    OUT receiver_id bigint, OUT context bigint, OUT priority smallint,
    OUT created_at timestamptz, OUT body text, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
    v_id bigint;
BEGIN
    IF p_queue_id IS NULL AND p_sender_id IS NULL THEN
        PERFORM courier_fail_v1(10, 'a read needs a queue or a sender');
    END IF;
    IF p_order IS NULL OR p_order NOT IN ('time', 'priority') THEN
        PERFORM courier_fail_v1(10, 'order must be time or priority');
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
            DELETE FROM courier_messages m WHERE m.id = v_id
            RETURNING 0, m.id, m.queue_id, m.sender_id, m.receiver_id, m.context, m.priority,
                      m.created_at, m.body
            INTO status, id, queue_id, sender_id, receiver_id, context, priority, created_at,
                 body;
            IF NOT FOUND THEN  -- cannot happen while the pick holds the row lock
                PERFORM courier_fail_v1(16, format('message %s vanished while popped', v_id));
            END IF;
            EXIT;
        END IF;
        SELECT 0, m.id, m.queue_id, m.sender_id, m.receiver_id, m.context, m.priority,
               m.created_at, m.body
        INTO status, id, queue_id, sender_id, receiver_id, context, priority, created_at, body
        FROM courier_messages m WHERE m.id = v_id;
        EXIT WHEN FOUND;  -- otherwise a pop took the picked message: pick again
    END LOOP;
    IF status IS NULL THEN  -- every peek lost its race
        PERFORM courier_fail_v1(16, 'a peek lost 100 races in a row to concurrent pops');
    END IF;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;


-- Everything a middleware has waiting, in one call and one commit: the sends first
-- (courier_send_batch_v1), then the pops by queue of each (queue, order) together
-- (courier_pop_batch_v1), then every other read (peeks, and pops by sender) one by
-- one (courier_read_v1). The pops by queue come grouped: all pops of one queue in
-- one order stand next to each other, the groups in the order they are to be
-- served. Request numbers are the caller's: send n is request p_send_requests[n],
-- and so on; one row per request, with message_ids for a send and the message
-- columns for a read. A read that raises (a missing queue) fails the whole call,
-- and the middleware then runs each request alone.
CREATE FUNCTION courier_exchange_v1(
    p_send_requests integer[], p_senders bigint[], p_bodies text[], p_receivers bigint[],
    p_priorities integer[], p_contexts bigint[], p_copy_sends integer[], p_copy_queues bigint[],
    p_max_body_bytes integer,
    p_pop_requests integer[], p_pop_queues bigint[], p_pop_orders text[], p_pop_readers bigint[],
    p_read_requests integer[], p_read_readers bigint[], p_read_queues bigint[],
    p_read_senders bigint[], p_read_orders text[], p_read_pops boolean[])
RETURNS TABLE (request integer, status smallint, message text, message_ids bigint[], id bigint,
               queue_id bigint, sender_id bigint, receiver_id bigint, context bigint,
               priority smallint, created_at timestamptz, body text, exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_pops integer := coalesce(cardinality(p_pop_requests), 0);
    v_first integer := 1;  -- where the current group of pops starts
BEGIN
    IF cardinality(p_send_requests) > 0 THEN
        RETURN QUERY
        SELECT p_send_requests[s.request], s.status, s.message, s.message_ids, NULL::bigint,
               NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::smallint,
               NULL::timestamptz, NULL::text, s.exec_ns
        FROM courier_send_batch_v1(p_senders, p_bodies, p_receivers, p_priorities, p_contexts,
                                   p_copy_sends, p_copy_queues, p_max_body_bytes) s;
    END IF;
    FOR v_last IN 1..v_pops LOOP
        CONTINUE WHEN v_last < v_pops AND p_pop_queues[v_last + 1] = p_pop_queues[v_last]
                      AND p_pop_orders[v_last + 1] = p_pop_orders[v_last];
        RETURN QUERY
        SELECT p_pop_requests[v_first - 1 + p.request], p.status, p.message, NULL::bigint[],
               p.id, p.queue_id, p.sender_id, p.receiver_id, p.context, p.priority,
               p.created_at, p.body, p.exec_ns
        FROM courier_pop_batch_v1(p_pop_queues[v_last], p_pop_orders[v_last],
                                  p_pop_readers[v_first:v_last]) p;
        v_first := v_last + 1;
    END LOOP;
    FOR v_i IN 1..coalesce(cardinality(p_read_requests), 0) LOOP
        RETURN QUERY
        SELECT p_read_requests[v_i], r.status, NULL::text, NULL::bigint[], r.id, r.queue_id,
               r.sender_id, r.receiver_id, r.context, r.priority, r.created_at, r.body,
               r.exec_ns
        FROM courier_read_v1(p_read_readers[v_i], p_read_queues[v_i], p_read_senders[v_i],
                             p_read_orders[v_i], p_read_pops[v_i]) r;
    END LOOP;
END;
$$;
