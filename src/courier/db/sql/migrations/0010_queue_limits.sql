-- Migration 0010: a queue may hold at most so many messages or bytes. Beyond its
-- limit a send is refused (QUOTA_EXCEEDED, status 18) or the queue drops its oldest
-- visible messages, as the queue says. Sends check the room of refusing queues and
-- trim dropping ones (courier_send_v2 and courier_send_batch_v2, replaced in place: a
-- middleware from before this migration gets the limits too).

ALTER TABLE courier_queues
    ADD COLUMN max_messages integer CHECK (max_messages > 0),
    ADD COLUMN max_bytes bigint CHECK (max_bytes > 0),
    ADD COLUMN overflow text NOT NULL DEFAULT 'refuse'
        CHECK (overflow IN ('refuse', 'drop_oldest'));

-- What a queue holds, leased and delayed messages included: messages counted up to
-- p_cap in each table, bytes summed only when p_bytes (that reads every length).
CREATE FUNCTION courier_queue_usage_v1(
    p_queue_id bigint, p_cap integer, p_bytes boolean, OUT messages bigint, OUT bytes bigint)
LANGUAGE sql STABLE AS $$
    SELECT (SELECT count(*) FROM (SELECT 1 FROM courier_messages m
                                  WHERE m.queue_id = p_queue_id LIMIT p_cap) s)
           + (SELECT count(*) FROM (SELECT 1 FROM courier_held_messages h
                                    WHERE h.queue_id = p_queue_id LIMIT p_cap) s),
           CASE WHEN p_bytes THEN
               (SELECT coalesce(sum(octet_length(m.body)), 0) FROM courier_messages m
                WHERE m.queue_id = p_queue_id)
               + (SELECT coalesce(sum(octet_length(h.body)), 0) FROM courier_held_messages h
                  WHERE h.queue_id = p_queue_id)
           ELSE 0 END
$$;

-- Locks the limited queues a send stores in, in id order (two senders never
-- deadlock), so that two sends count their room one after the other. NO KEY UPDATE
-- does not wait for the key-share locks every send takes.
CREATE FUNCTION courier_lock_limited_v1(p_queue_ids bigint[])
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM FROM courier_queues q WHERE q.id = ANY (p_queue_ids) ORDER BY q.id
    FOR NO KEY UPDATE;
END;
$$;

-- The queues among p_queue_ids that refuse messages beyond a limit, and how many
-- messages and bytes each can still take.
CREATE FUNCTION courier_room_v1(p_queue_ids bigint[])
RETURNS TABLE (queue_id bigint, messages_left bigint, bytes_left bigint)
LANGUAGE sql STABLE AS $$
    SELECT q.id,
           coalesce(q.max_messages - u.messages, 9223372036854775807),
           coalesce(q.max_bytes - u.bytes, 9223372036854775807)
    FROM courier_queues q,
         LATERAL courier_queue_usage_v1(
             q.id, coalesce(q.max_messages, 0), q.max_bytes IS NOT NULL) u
    WHERE q.id = ANY (p_queue_ids) AND q.overflow = 'refuse'
      AND (q.max_messages IS NOT NULL OR q.max_bytes IS NOT NULL)
$$;

-- A send of a p_size-byte body to p_queue_ids (limited queues, locked): QUOTA_EXCEEDED
-- (18) when the body is larger than one's byte limit, or one refuses messages beyond
-- its limit and has no room left.
CREATE FUNCTION courier_check_room_v1(p_queue_ids bigint[], p_size integer)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_full bigint;
BEGIN
    SELECT q.id INTO v_full FROM courier_queues q
    WHERE q.id = ANY (p_queue_ids) AND q.max_bytes < p_size ORDER BY q.id LIMIT 1;
    IF FOUND THEN  -- even a queue that drops its oldest could not keep it
        PERFORM courier_fail_v1(18,
            format('a body of %s bytes can never fit queue %s', p_size, v_full));
    END IF;
    SELECT r.queue_id INTO v_full FROM courier_room_v1(p_queue_ids) r
    WHERE r.messages_left < 1 OR r.bytes_left < p_size
    ORDER BY r.queue_id LIMIT 1;
    IF FOUND THEN
        PERFORM courier_fail_v1(18,
            format('queue %s is full: its limit refuses new messages', v_full));
    END IF;
END;
$$;

-- After a send stored messages in p_queue_ids (limited queues, locked), each that drops
-- its oldest beyond its limit drops them: the oldest visible messages go until what it
-- holds (leased and delayed messages count, but are never dropped) is within the limit.
CREATE FUNCTION courier_trim_v1(p_queue_ids bigint[])
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_queue record;
    v_held record;
    v_ids bigint[];
BEGIN
    FOR v_queue IN
        SELECT q.id, q.max_messages, q.max_bytes FROM courier_queues q
        WHERE q.id = ANY (p_queue_ids) AND q.overflow = 'drop_oldest'
        ORDER BY q.id
    LOOP
        SELECT count(*) AS messages, coalesce(sum(octet_length(h.body)), 0) AS bytes
        INTO v_held FROM courier_held_messages h WHERE h.queue_id = v_queue.id;
        SELECT array_agg(r.id) INTO v_ids FROM (
            SELECT m.id, count(*) OVER newest AS messages,
                   sum(octet_length(m.body)) OVER newest AS bytes
            FROM courier_messages m WHERE m.queue_id = v_queue.id
            WINDOW newest AS (ORDER BY m.id DESC)
        ) r
        WHERE r.messages + v_held.messages > v_queue.max_messages
           OR r.bytes + v_held.bytes > v_queue.max_bytes;
        IF v_ids IS NOT NULL THEN
            -- A message a reader is taking right now is on its way out anyway.
            DELETE FROM courier_messages m WHERE m.id IN (
                SELECT x.id FROM courier_messages x WHERE x.id = ANY (v_ids)
                FOR UPDATE SKIP LOCKED);
        END IF;
    END LOOP;
END;
$$;

-- Sets how a queue treats failing and expired messages (as v1), and its limits:
-- at most p_max_messages messages and p_max_bytes bytes of bodies (NULL: no limit),
-- held ones included; beyond them a send is refused ('refuse', QUOTA_EXCEEDED) or the
-- oldest visible messages are dropped ('drop_oldest', at once when it is over them).
CREATE FUNCTION courier_configure_queue_v2(
    p_queue_id bigint, p_max_deliveries integer, p_dead_letter_queue_id bigint,
    p_dead_letter_expired boolean, p_max_messages integer, p_max_bytes bigint,
    p_overflow text,
    OUT queue_id bigint, OUT max_deliveries integer, OUT dead_letter_queue_id bigint,
    OUT dead_letter_expired boolean, OUT max_messages integer, OUT max_bytes bigint,
    OUT overflow text, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    IF p_max_messages <= 0 OR p_max_bytes <= 0 THEN
        PERFORM courier_fail_v1(10, 'a queue''s limits must be positive');
    END IF;
    IF p_overflow IS NULL OR p_overflow NOT IN ('refuse', 'drop_oldest') THEN
        PERFORM courier_fail_v1(10, format('overflow %s is not refuse or drop_oldest', p_overflow));
    END IF;
    SELECT c.exec_ns INTO exec_ns FROM courier_configure_queue_v1(
        p_queue_id, p_max_deliveries, p_dead_letter_queue_id, p_dead_letter_expired) c;
    UPDATE courier_queues q
    SET max_messages = p_max_messages, max_bytes = p_max_bytes, overflow = p_overflow
    WHERE q.id = p_queue_id
    RETURNING q.id, q.max_deliveries, q.dead_letter_queue_id, q.dead_letter_expired,
              q.max_messages, q.max_bytes, q.overflow
    INTO queue_id, max_deliveries, dead_letter_queue_id, dead_letter_expired,
         max_messages, max_bytes, overflow;
    PERFORM courier_trim_v1(ARRAY[p_queue_id]);  -- a dropping queue over its new limit
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

CREATE OR REPLACE FUNCTION courier_send_v2(
    p_sender_id bigint, p_queue_ids bigint[], p_body bytea, p_receiver_id bigint,
    p_priority integer, p_context bigint, p_max_body_bytes integer,
    p_delay_ms integer, p_ttl_ms integer, p_dedup_id text, p_dedup_window_ms integer,
    OUT message_ids bigint[], OUT exec_ns bigint)
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
             deliveries, expires_at, visible_at)
        SELECT message_ids[w.ord], w.queue_id, p_sender_id, p_receiver_id, p_context,
               p_priority, v_now, p_body, 0,
               v_now + make_interval(secs => p_ttl_ms / 1000.0),
               v_now + make_interval(secs => p_delay_ms / 1000.0)
        FROM unnest(p_queue_ids) WITH ORDINALITY AS w(queue_id, ord);
    ELSE
        INSERT INTO courier_messages
            (id, queue_id, sender_id, receiver_id, context, priority, created_at, body,
             expires_at)
        OVERRIDING SYSTEM VALUE
        SELECT message_ids[w.ord], w.queue_id, p_sender_id, p_receiver_id, p_context,
               p_priority, v_now, p_body, v_now + make_interval(secs => p_ttl_ms / 1000.0)
        FROM unnest(p_queue_ids) WITH ORDINALITY AS w(queue_id, ord)
        ORDER BY w.ord;
    END IF;
    IF v_limited IS NOT NULL THEN
        PERFORM courier_trim_v1(v_limited);
    END IF;
    IF p_dedup_id IS NOT NULL THEN
        UPDATE courier_dedup d SET message_ids = courier_send_v2.message_ids
        WHERE d.sender_id = p_sender_id AND d.dedup_id = p_dedup_id;
    END IF;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

CREATE OR REPLACE FUNCTION courier_send_batch_v2(
    p_senders bigint[], p_bodies bytea[], p_receivers bigint[], p_priorities integer[],
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
    v_limited bigint[];
BEGIN
    -- Key-share locks keep the queues from being deleted before the insert; the same
    -- look finds the queues with a limit.
    SELECT array_agg(l.id ORDER BY l.id) FILTER (WHERE l.limited) INTO v_limited FROM (
        SELECT q.id, (q.max_messages IS NOT NULL OR q.max_bytes IS NOT NULL) AS limited
        FROM courier_queues q WHERE q.id = ANY (p_copy_queues) FOR KEY SHARE
    ) l;
    IF v_limited IS NOT NULL THEN
        PERFORM courier_lock_limited_v1(v_limited);
    END IF;
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
        SELECT k.n, k.sender, k.body, k.receiver, k.priority, k.context, k.missing_queue,
               CASE WHEN k.failure = 0 AND k.n IN (SELECT b.request FROM beyond b) THEN 10
                    ELSE k.failure END AS failure
        FROM valid_otherwise k
    ), answered AS (
        SELECT k.*, coalesce((ARRAY[10, 12, 11, 10, 10, 10, 6, 13, 1, 18])[k.failure], 0)::smallint
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
                   ELSE 'a queue it names is full (its limit refuses new messages)'
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
    IF v_limited IS NOT NULL THEN
        PERFORM courier_trim_v1(v_limited);
    END IF;
END;
$$;
