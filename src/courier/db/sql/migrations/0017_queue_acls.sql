-- == Queue access lists (migration 0017) ============================================
-- A queue may name who may send to it (senders) and who may read it (readers): arrays
-- of client ids, NULL meaning anyone (the default, and how every queue behaved
-- before). The queue's owner (created_by) and admins may always do both. Only they
-- may set or clear the lists (courier_set_queue_acl_v1) or see them
-- (courier_queue_acl_v1). A refusal is NOT_AUTHORISED (13), naming client and queue.
--
-- The checks live in the functions that store and take messages, on the queue row
-- they already look at, so a queue without lists costs one NULL test:
--   sends     courier_send_v2 (so publishes and transaction commits), courier_send_v3
--             (single sends, sends with options, courier_send_each_v1),
--             courier_send_batch_v2 (plain batched sends; a refused request fails
--             alone), courier_send_many_v2 (a queue with a send list takes the general
--             path, all or none). A publish stores through courier_send_v2, so one
--             subscription queue whose send list leaves out the publisher refuses the
--             whole publish.
--   reads     courier_read_v3 (pop, peek, leased reads), courier_pop_response_v3,
--             courier_pop_batch_v3 (a refused reader fails alone), courier_pop_many_v2;
--             a read by sender across all queues (courier_pick_v1) skips the queues
--             the reader may not read, and courier_queues_for_me_v2 leaves them out.
-- The older versions an older middleware may still call check alike:
-- courier_read_v2, courier_pop_response_v2, courier_pop_batch_v2 and
-- courier_pop_many_v1 now run their successors (dropping the properties),
-- courier_send_many_v1 sends a batch naming a queue with a send list down its checked
-- path, and courier_queues_for_me_v1 leaves unreadable queues out; courier_exchange_v2
-- to _v4 call only checked functions.
-- Acks, nacks and extensions need the lease holder already and are not checked again.
-- Ids of deleted clients in a list grant nothing (client ids are never reused).

ALTER TABLE courier_queues ADD COLUMN senders bigint[], ADD COLUMN readers bigint[];

-- The few queues with a read list, for reads across queues.
CREATE INDEX courier_queues_guarded ON courier_queues (id) WHERE readers IS NOT NULL;

-- Whether the client may act on a queue with this owner and list (NULL: anyone).
CREATE FUNCTION courier_allows_v1(p_client_id bigint, p_owner_id bigint, p_list bigint[])
RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT p_list IS NULL OR p_client_id = ANY (p_list)
           OR coalesce(p_client_id = p_owner_id, false) OR courier_is_admin_v1(p_client_id)
$$;

-- The queues p_reader_id may not read (empty for most readers, and for admins).
CREATE FUNCTION courier_unreadable_v1(p_reader_id bigint)
RETURNS bigint[]
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_ids bigint[];
BEGIN
    SELECT coalesce(array_agg(q.id), '{}') INTO v_ids FROM courier_queues q
    WHERE q.readers IS NOT NULL AND NOT p_reader_id = ANY (q.readers)
      AND q.created_by IS DISTINCT FROM p_reader_id;
    IF cardinality(v_ids) > 0 AND courier_is_admin_v1(p_reader_id) THEN
        RETURN '{}';
    END IF;
    RETURN v_ids;
END;
$$;

-- Sets both lists of a queue (NULL: anyone), as its owner or an admin. The lists are
-- stored sorted and without repeats; every id must be a client (CLIENT_NOT_FOUND).
CREATE FUNCTION courier_set_queue_acl_v1(
    p_actor_id bigint, p_queue_id bigint, p_senders bigint[], p_readers bigint[],
    OUT queue_id bigint, OUT senders bigint[], OUT readers bigint[], OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
    v_missing bigint;
BEGIN
    PERFORM courier_check_owner_v1(p_actor_id, p_queue_id, 'set the access lists of');
    IF array_position(p_senders, NULL) IS NOT NULL OR array_position(p_readers, NULL) IS NOT NULL
    THEN
        PERFORM courier_fail_v1(10, 'an access list holds client ids, not NULL');
    END IF;
    SELECT min(w.id) INTO v_missing
    FROM unnest(coalesce(p_senders, '{}') || coalesce(p_readers, '{}')) w(id)
    WHERE NOT EXISTS (SELECT 1 FROM courier_clients c WHERE c.id = w.id);
    IF v_missing IS NOT NULL THEN
        PERFORM courier_fail_v1(6, format('no client %s', v_missing));
    END IF;
    UPDATE courier_queues q
    SET senders = CASE WHEN p_senders IS NOT NULL
                       THEN ARRAY(SELECT DISTINCT s FROM unnest(p_senders) s ORDER BY s) END,
        readers = CASE WHEN p_readers IS NOT NULL
                       THEN ARRAY(SELECT DISTINCT r FROM unnest(p_readers) r ORDER BY r) END
    WHERE q.id = p_queue_id
    RETURNING q.id, q.senders, q.readers INTO queue_id, senders, readers;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- A queue's lists (NULL: anyone), for its owner or an admin.
CREATE FUNCTION courier_queue_acl_v1(
    p_actor_id bigint, p_queue_id bigint,
    OUT queue_id bigint, OUT senders bigint[], OUT readers bigint[], OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    PERFORM courier_check_owner_v1(p_actor_id, p_queue_id, 'see the access lists of');
    SELECT q.id, q.senders, q.readers INTO queue_id, senders, readers
    FROM courier_queues q WHERE q.id = p_queue_id;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- The functions below are replaced in place (same signatures) to check the lists.

CREATE OR REPLACE FUNCTION courier_pick_v1(
    p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text, p_lock boolean)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_tried bigint[] := '{}';  -- listed before, and held by others or gone
    v_ids bigint[];            -- the next four visible messages, in read order
    v_id bigint;
    v_hidden bigint[] := '{}';  -- queues the reader may not read (migration 0017)
BEGIN
    IF p_queue_id IS NULL THEN
        v_hidden := courier_unreadable_v1(p_reader_id);
    END IF;
    LOOP
        IF p_sender_id IS NULL AND p_order = 'time' THEN
            SELECT (array_agg(c.id ORDER BY c.created_at, c.id))[:4] INTO v_ids
            FROM (VALUES (0), (p_reader_id)) a(audience) CROSS JOIN LATERAL (
                SELECT m.id, m.created_at FROM courier_messages m
                WHERE m.queue_id = p_queue_id AND m.audience = a.audience
                  AND m.id <> ALL (v_tried)
                ORDER BY m.created_at, m.id LIMIT 4) c;
        ELSIF p_sender_id IS NULL THEN
            SELECT (array_agg(c.id ORDER BY c.priority DESC, c.created_at, c.id))[:4] INTO v_ids
            FROM (VALUES (0), (p_reader_id)) a(audience) CROSS JOIN LATERAL (
                SELECT m.id, m.priority, m.created_at FROM courier_messages m
                WHERE m.queue_id = p_queue_id AND m.audience = a.audience
                  AND m.id <> ALL (v_tried)
                ORDER BY m.priority DESC, m.created_at, m.id LIMIT 4) c;
        ELSIF p_queue_id IS NULL AND p_order = 'time' THEN
            SELECT (array_agg(c.id ORDER BY c.created_at, c.id))[:4] INTO v_ids
            FROM (VALUES (0), (p_reader_id)) a(audience) CROSS JOIN LATERAL (
                SELECT m.id, m.created_at FROM courier_messages m
                WHERE m.sender_id = p_sender_id AND m.audience = a.audience
                  AND m.id <> ALL (v_tried) AND m.queue_id <> ALL (v_hidden)
                ORDER BY m.created_at, m.id LIMIT 4) c;
        ELSIF p_queue_id IS NULL THEN
            SELECT (array_agg(c.id ORDER BY c.priority DESC, c.created_at, c.id))[:4] INTO v_ids
            FROM (VALUES (0), (p_reader_id)) a(audience) CROSS JOIN LATERAL (
                SELECT m.id, m.priority, m.created_at FROM courier_messages m
                WHERE m.sender_id = p_sender_id AND m.audience = a.audience
                  AND m.id <> ALL (v_tried) AND m.queue_id <> ALL (v_hidden)
                ORDER BY m.priority DESC, m.created_at, m.id LIMIT 4) c;
        ELSIF p_order = 'time' THEN
            SELECT (array_agg(c.id ORDER BY c.created_at, c.id))[:4] INTO v_ids
            FROM (VALUES (0), (p_reader_id)) a(audience) CROSS JOIN LATERAL (
                SELECT m.id, m.created_at FROM courier_messages m
                WHERE m.queue_id = p_queue_id AND m.sender_id = p_sender_id
                  AND m.audience = a.audience AND m.id <> ALL (v_tried)
                ORDER BY m.created_at, m.id LIMIT 4) c;
        ELSE
            SELECT (array_agg(c.id ORDER BY c.priority DESC, c.created_at, c.id))[:4] INTO v_ids
            FROM (VALUES (0), (p_reader_id)) a(audience) CROSS JOIN LATERAL (
                SELECT m.id, m.priority, m.created_at FROM courier_messages m
                WHERE m.queue_id = p_queue_id AND m.sender_id = p_sender_id
                  AND m.audience = a.audience AND m.id <> ALL (v_tried)
                ORDER BY m.priority DESC, m.created_at, m.id LIMIT 4) c;
        END IF;
        IF NOT p_lock OR v_ids IS NULL THEN
            RETURN v_ids[1];
        END IF;
        FOREACH v_id IN ARRAY v_ids LOOP
            PERFORM FROM courier_messages m WHERE m.id = v_id FOR UPDATE SKIP LOCKED;
            IF FOUND THEN
                RETURN v_id;
            END IF;
        END LOOP;
        IF cardinality(v_ids) < 4 THEN
            RETURN NULL;
        END IF;
        v_tried := v_tried || v_ids;
    END LOOP;
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
        SELECT k.n, k.sender, k.body, k.receiver, k.priority, k.context, k.missing_queue,
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

CREATE OR REPLACE FUNCTION courier_queues_for_me_v2(
    p_reader_id bigint, p_count_cap integer,
    OUT ids bigint[], OUT names text[], OUT message_counts bigint[], OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    SELECT coalesce(array_agg(c.id ORDER BY c.id), '{}'),
           coalesce(array_agg(c.name ORDER BY c.id), '{}'),
           coalesce(array_agg(c.n ORDER BY c.id), '{}')
    INTO ids, names, message_counts
    FROM (
        SELECT q.id, q.name, courier_count_messages_v1(q.id, p_reader_id, p_count_cap) AS n
        FROM courier_queues q
        WHERE q.readers IS NULL OR courier_allows_v1(p_reader_id, q.created_by, q.readers)
    ) c
    WHERE c.n > 0;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

CREATE OR REPLACE FUNCTION courier_send_v3(
    p_sender_id bigint, p_queue_ids bigint[], p_body bytea, p_receiver_id bigint,
    p_priority integer, p_context bigint, p_max_body_bytes integer,
    p_delay_ms integer, p_ttl_ms integer, p_dedup_id text, p_dedup_window_ms integer,
    p_properties jsonb, OUT message_ids bigint[], OUT exec_ns bigint)
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
             deliveries, expires_at, visible_at, properties)
        SELECT message_ids[w.ord], w.queue_id, p_sender_id, p_receiver_id, p_context,
               p_priority, v_now, p_body, 0,
               v_now + make_interval(secs => p_ttl_ms / 1000.0),
               v_now + make_interval(secs => p_delay_ms / 1000.0), p_properties
        FROM unnest(p_queue_ids) WITH ORDINALITY AS w(queue_id, ord);
    ELSE
        INSERT INTO courier_messages
            (id, queue_id, sender_id, receiver_id, context, priority, created_at, body,
             expires_at, properties)
        OVERRIDING SYSTEM VALUE
        SELECT message_ids[w.ord], w.queue_id, p_sender_id, p_receiver_id, p_context,
               p_priority, v_now, p_body, v_now + make_interval(secs => p_ttl_ms / 1000.0),
               p_properties
        FROM unnest(p_queue_ids) WITH ORDINALITY AS w(queue_id, ord)
        ORDER BY w.ord;
    END IF;
    IF v_limited IS NOT NULL THEN
        PERFORM courier_trim_v1(v_limited);
    END IF;
    IF p_dedup_id IS NOT NULL THEN
        UPDATE courier_dedup d SET message_ids = courier_send_v3.message_ids
        WHERE d.sender_id = p_sender_id AND d.dedup_id = p_dedup_id;
    END IF;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

CREATE OR REPLACE FUNCTION courier_read_v3(
    p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text, p_pop boolean,
    p_lease_ms integer, p_instance_id bigint,
    OUT status smallint, OUT id bigint, OUT queue_id bigint, OUT sender_id bigint,
    OUT receiver_id bigint, OUT context bigint, OUT priority smallint,
    OUT created_at timestamptz, OUT body bytea, OUT deliveries integer,
    OUT delivery_id bigint, OUT dead_from bigint, OUT failure text, OUT properties jsonb,
    OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
    v_id bigint;
    v_taken courier_messages%ROWTYPE;
    v_readers bigint[];  -- the queue's read list
    v_owner bigint;
BEGIN
    IF p_queue_id IS NULL AND p_sender_id IS NULL THEN
        PERFORM courier_fail_v1(10, 'a read needs a queue or a sender');
    END IF;
    IF p_order IS NULL OR p_order NOT IN ('time', 'priority') THEN
        PERFORM courier_fail_v1(10, 'order must be time or priority');
    END IF;
    IF p_lease_ms < 0 OR (p_lease_ms > 0 AND NOT p_pop) THEN
        PERFORM courier_fail_v1(10, 'a lease is a positive time, and only a pop takes one');
    END IF;
    IF p_queue_id IS NOT NULL THEN
        SELECT q.readers, q.created_by INTO v_readers, v_owner
        FROM courier_queues q WHERE q.id = p_queue_id;
        IF NOT FOUND THEN
            PERFORM courier_fail_v1(1, format('queue %s does not exist', p_queue_id));
        ELSIF v_readers IS NOT NULL AND NOT courier_allows_v1(p_reader_id, v_owner, v_readers) THEN
            PERFORM courier_fail_v1(13, format(
                'client %s may not read queue %s (not on its read list)', p_reader_id, p_queue_id));
        END IF;
    END IF;
    FOR v_attempt IN 1..100 LOOP
        IF p_pop AND p_sender_id IS NULL THEN
            v_id := courier_take_one_v1(p_reader_id, p_queue_id, p_order);
        ELSE
            v_id := courier_pick_v1(
                p_reader_id, p_queue_id, p_sender_id, p_order, coalesce(p_pop, false));
        END IF;
        IF v_id IS NULL THEN
            -- The queue was found above (a delete since is read as after this read).
            status := CASE WHEN p_queue_id IS NULL THEN 4 ELSE 5 END;
            EXIT;
        ELSIF p_pop THEN
            DELETE FROM courier_messages m WHERE m.id = v_id RETURNING m.* INTO v_taken;
            IF NOT FOUND THEN  -- cannot happen while the pick holds the row lock
                PERFORM courier_fail_v1(16, format('message %s vanished while popped', v_id));
            END IF;
        ELSE
            SELECT m.* INTO v_taken FROM courier_messages m WHERE m.id = v_id;
            CONTINUE WHEN NOT FOUND;  -- a pop took the picked message: pick again
        END IF;
        status := 0;
        id := v_taken.id; queue_id := v_taken.queue_id; sender_id := v_taken.sender_id;
        receiver_id := v_taken.receiver_id; context := v_taken.context;
        priority := v_taken.priority; created_at := v_taken.created_at; body := v_taken.body;
        deliveries := v_taken.deliveries; dead_from := v_taken.dead_from;
        failure := v_taken.failure; properties := v_taken.properties;
        IF p_lease_ms > 0 THEN
            SELECT l.delivery_id, l.deliveries INTO delivery_id, deliveries
            FROM courier_lease_v1(v_taken, p_lease_ms, p_reader_id, p_instance_id) l;
        END IF;
        EXIT;
    END LOOP;
    IF status IS NULL THEN  -- every peek lost its race
        PERFORM courier_fail_v1(16, 'a peek lost 100 races in a row to concurrent pops');
    END IF;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

CREATE OR REPLACE FUNCTION courier_pop_response_v3(
    p_reader_id bigint, p_queue_id bigint, p_context bigint,
    OUT status smallint, OUT id bigint, OUT queue_id bigint, OUT sender_id bigint,
    OUT receiver_id bigint, OUT context bigint, OUT priority smallint,
    OUT created_at timestamptz, OUT body bytea, OUT deliveries integer,
    OUT delivery_id bigint, OUT dead_from bigint, OUT failure text, OUT properties jsonb,
    OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
    v_readers bigint[];  -- the queue's read list
    v_owner bigint;
BEGIN
    IF p_queue_id IS NOT NULL THEN
        SELECT q.readers, q.created_by INTO v_readers, v_owner
        FROM courier_queues q WHERE q.id = p_queue_id;
        IF NOT FOUND THEN
            PERFORM courier_fail_v1(1, format('queue %s does not exist', p_queue_id));
        ELSIF v_readers IS NOT NULL AND NOT courier_allows_v1(p_reader_id, v_owner, v_readers) THEN
            PERFORM courier_fail_v1(13, format(
                'client %s may not read queue %s (not on its read list)', p_reader_id, p_queue_id));
        END IF;
    END IF;
    DELETE FROM courier_messages m WHERE m.id = (
        SELECT r.id FROM courier_messages r
        WHERE r.queue_id = p_queue_id AND r.receiver_id = p_reader_id AND r.context = p_context
        ORDER BY r.created_at, r.id LIMIT 1 FOR UPDATE SKIP LOCKED)
    RETURNING 0, m.id, m.queue_id, m.sender_id, m.receiver_id, m.context, m.priority,
              m.created_at, m.body, m.deliveries, m.dead_from, m.failure, m.properties
    INTO status, id, queue_id, sender_id, receiver_id, context, priority, created_at, body,
         deliveries, dead_from, failure, properties;
    IF NOT FOUND THEN
        IF NOT EXISTS (SELECT 1 FROM courier_queues q WHERE q.id = p_queue_id) THEN
            PERFORM courier_fail_v1(1, format('queue %s does not exist', p_queue_id));
        END IF;
        status := 4;
    END IF;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

CREATE OR REPLACE FUNCTION courier_pop_batch_v3(p_queue_id bigint, p_order text, p_readers bigint[])
RETURNS TABLE (request integer, status smallint, message text, id bigint, queue_id bigint,
               sender_id bigint, receiver_id bigint, context bigint, priority smallint,
               created_at timestamptz, body bytea, deliveries integer, delivery_id bigint,
               dead_from bigint, failure text, properties jsonb, exec_ns bigint)
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
    v_readers bigint[];  -- the queue's read list
    v_owner bigint;
    v_allowed integer[];       -- the requests whose reader may read the queue
    v_allowed_readers bigint[];
BEGIN
    IF p_order IS NULL OR p_order NOT IN ('time', 'priority') THEN
        RETURN QUERY SELECT r.n::integer, 10::smallint, 'order must be time or priority',
            NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,
            NULL::smallint, NULL::timestamptz, NULL::bytea, NULL::integer, NULL::bigint,
            NULL::bigint, NULL::text, NULL::jsonb, 0::bigint
        FROM generate_subscripts(p_readers, 1) r(n);
        RETURN;
    END IF;
    SELECT q.readers, q.created_by INTO v_readers, v_owner
    FROM courier_queues q WHERE q.id = p_queue_id;
    IF NOT FOUND THEN
        RETURN QUERY SELECT r.n::integer, 1::smallint,
            format('queue %s does not exist', p_queue_id),
            NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,
            NULL::smallint, NULL::timestamptz, NULL::bytea, NULL::integer, NULL::bigint,
            NULL::bigint, NULL::text, NULL::jsonb, 0::bigint
        FROM generate_subscripts(p_readers, 1) r(n);
        RETURN;
    END IF;
    IF v_readers IS NOT NULL THEN
        -- A reader the read list leaves out fails alone; the others pop as usual.
        SELECT array_agg(r.n::integer ORDER BY r.n), array_agg(r.reader ORDER BY r.n)
        INTO v_allowed, v_allowed_readers
        FROM unnest(p_readers) WITH ORDINALITY r(reader, n)
        WHERE courier_allows_v1(r.reader, v_owner, v_readers);
        IF coalesce(cardinality(v_allowed), 0) < cardinality(p_readers) THEN
            RETURN QUERY SELECT r.n::integer, 13::smallint,
                format('client %s may not read queue %s (not on its read list)',
                       r.reader, p_queue_id),
            NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,
            NULL::smallint, NULL::timestamptz, NULL::bytea, NULL::integer, NULL::bigint,
            NULL::bigint, NULL::text, NULL::jsonb, 0::bigint
            FROM unnest(p_readers) WITH ORDINALITY r(reader, n)
            WHERE NOT r.n = ANY (coalesce(v_allowed, '{}'));
            IF v_allowed IS NOT NULL THEN
                RETURN QUERY SELECT v_allowed[p.request], p.status, p.message, p.id, p.queue_id,
                    p.sender_id, p.receiver_id, p.context, p.priority, p.created_at, p.body,
                    p.deliveries, p.delivery_id, p.dead_from, p.failure, p.properties, p.exec_ns
                FROM courier_pop_batch_v3(p_queue_id, p_order, v_allowed_readers) p;
            END IF;
            RETURN;
        END IF;
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
        deliveries := v_row.deliveries; dead_from := v_row.dead_from; failure := v_row.failure;
        properties := v_row.properties;
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
                      m.context, m.priority, m.created_at, m.body, m.deliveries, m.dead_from,
                      m.failure, m.properties
            INTO request, status, message, id, queue_id, sender_id, receiver_id, context,
                 priority, created_at, body, deliveries, dead_from, failure, properties;
            exec_ns := courier_elapsed_ns_v1(v_started);
            RETURN NEXT;
        ELSE
            v_shared := v_shared || v_row.n;  -- answered empty below
        END IF;
    END LOOP;

    status := 5;
    message := NULL;
    id := NULL; queue_id := NULL; sender_id := NULL; receiver_id := NULL; context := NULL;
    priority := NULL; created_at := NULL; body := NULL; deliveries := NULL;
    dead_from := NULL; failure := NULL; properties := NULL;
    FOR v_i IN v_next..coalesce(cardinality(v_shared), 0) LOOP
        request := v_shared[v_i];
        exec_ns := courier_elapsed_ns_v1(v_started);
        RETURN NEXT;
    END LOOP;
END;
$$;

CREATE OR REPLACE FUNCTION courier_pop_many_v2(
    p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text,
    p_count integer, p_lease_ms integer, p_instance_id bigint)
RETURNS TABLE (id bigint, queue_id bigint, sender_id bigint, receiver_id bigint,
               context bigint, priority smallint, created_at timestamptz, body bytea,
               deliveries integer, delivery_id bigint, dead_from bigint, failure text,
               properties jsonb, exec_ns bigint)
LANGUAGE plpgsql
-- Plan once: custom plans of these statements cost more than running them.
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
    v_row record;
    v_readers bigint[];  -- the queue's read list
    v_owner bigint;
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
        SELECT q.readers, q.created_by INTO v_readers, v_owner
        FROM courier_queues q WHERE q.id = p_queue_id;
        IF NOT FOUND THEN
            PERFORM courier_fail_v1(1, format('queue %s does not exist', p_queue_id));
        ELSIF v_readers IS NOT NULL AND NOT courier_allows_v1(p_reader_id, v_owner, v_readers) THEN
            PERFORM courier_fail_v1(13, format(
                'client %s may not read queue %s (not on its read list)', p_reader_id, p_queue_id));
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
                   p.properties, p.exec_ns
            FROM courier_pop_batch_v3(p_queue_id, p_order,
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
                   t.properties, courier_elapsed_ns_v1(v_started)
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
                   t.properties, courier_elapsed_ns_v1(v_started)
            FROM taken t ORDER BY t.priority DESC, t.created_at, t.id;
        END IF;
        RETURN;
    END IF;
    FOR v_i IN 1..p_count LOOP
        SELECT * INTO v_row FROM courier_read_v3(p_reader_id, p_queue_id, p_sender_id, p_order,
                                                 true, coalesce(p_lease_ms, 0), p_instance_id);
        EXIT WHEN v_row.status <> 0;
        id := v_row.id; queue_id := v_row.queue_id; sender_id := v_row.sender_id;
        receiver_id := v_row.receiver_id; context := v_row.context;
        priority := v_row.priority; created_at := v_row.created_at; body := v_row.body;
        deliveries := v_row.deliveries; delivery_id := v_row.delivery_id;
        dead_from := v_row.dead_from; failure := v_row.failure;
        properties := v_row.properties;
        exec_ns := courier_elapsed_ns_v1(v_started);
        RETURN NEXT;
    END LOOP;
END;
$$;

CREATE OR REPLACE FUNCTION courier_send_many_v2(
    p_sender_id bigint, p_queue_ids bigint[], p_bodies bytea[], p_receivers bigint[],
    p_priorities integer[], p_contexts bigint[], p_delays integer[], p_ttls integer[],
    p_dedup_ids text[], p_properties jsonb[], p_max_body_bytes integer,
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
       OR coalesce(cardinality(p_properties), 0) <> v_count THEN
        PERFORM courier_fail_v1(10, 'every field of a batch has one value per message');
    END IF;
    IF EXISTS (SELECT FROM generate_subscripts(p_bodies, 1) k
               WHERE coalesce(p_delays[k], 0) <> 0 OR p_ttls[k] IS NOT NULL
                     OR p_dedup_ids[k] IS NOT NULL) THEN
        RETURN QUERY SELECT * FROM courier_send_each_v1(
            p_sender_id, p_queue_ids, p_bodies, p_receivers, p_priorities, p_contexts, p_delays,
            p_ttls, p_dedup_ids, p_properties, p_max_body_bytes, p_dedup_window_ms, v_started);
        RETURN;
    END IF;
    -- Properties ride along on the one-statement path; a batch with properties that
    -- needs the general path goes one message at a time, as one with options does.
    v_with_properties := EXISTS (SELECT FROM unnest(p_properties) p WHERE p IS NOT NULL);
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
            RETURN QUERY SELECT * FROM courier_send_each_v1(
                p_sender_id, p_queue_ids, p_bodies, p_receivers, p_priorities, p_contexts, p_delays,
                p_ttls, p_dedup_ids, p_properties, p_max_body_bytes, p_dedup_window_ms, v_started);
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
            RETURN QUERY SELECT * FROM courier_send_each_v1(
                p_sender_id, p_queue_ids, p_bodies, p_receivers, p_priorities, p_contexts, p_delays,
                p_ttls, p_dedup_ids, p_properties, p_max_body_bytes, p_dedup_window_ms, v_started);
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
            RETURN QUERY SELECT * FROM courier_send_each_v1(
                p_sender_id, p_queue_ids, p_bodies, p_receivers, p_priorities, p_contexts, p_delays,
                p_ttls, p_dedup_ids, p_properties, p_max_body_bytes, p_dedup_window_ms, v_started);
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
               m.properties, nextval('courier_messages_id_seq') AS id
        FROM unnest(p_bodies, p_receivers, p_priorities, p_contexts, p_properties)
                 WITH ORDINALITY m(body, receiver, priority, context, properties, n)
        CROSS JOIN unnest(p_queue_ids) WITH ORDINALITY q(queue_id, ord)
        ORDER BY m.n, q.ord
    ), stored AS (
        INSERT INTO courier_messages
            (id, queue_id, sender_id, receiver_id, context, priority, body, properties)
        OVERRIDING SYSTEM VALUE
        SELECT d.id, d.queue_id, p_sender_id, d.receiver, d.context, d.priority, d.body,
               d.properties
        FROM drawn d ORDER BY d.n, d.ord
        RETURNING id
    )
    -- Joined to what was stored, so the insert has run when exec_ns is taken.
    SELECT array_agg(d.id ORDER BY d.ord), courier_elapsed_ns_v1(v_started)
    FROM drawn d JOIN stored s ON s.id = d.id GROUP BY d.n ORDER BY d.n;
END;
$$;

CREATE OR REPLACE FUNCTION courier_queues_for_me_v1(
    p_reader_id bigint,
    OUT ids bigint[], OUT names text[], OUT message_counts bigint[], OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    SELECT coalesce(array_agg(c.id ORDER BY c.id), '{}'),
           coalesce(array_agg(c.name ORDER BY c.id), '{}'),
           coalesce(array_agg(c.n ORDER BY c.id), '{}')
    INTO ids, names, message_counts
    FROM (
        SELECT q.id, q.name,
               (SELECT count(*) FROM courier_messages m
                WHERE m.queue_id = q.id AND m.audience IN (0, p_reader_id)) AS n
        FROM courier_queues q
        WHERE q.readers IS NULL OR courier_allows_v1(p_reader_id, q.created_by, q.readers)
    ) c
    WHERE c.n > 0;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

CREATE OR REPLACE FUNCTION courier_read_v2(
    p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text, p_pop boolean,
    p_lease_ms integer, p_instance_id bigint,
    OUT status smallint, OUT id bigint, OUT queue_id bigint, OUT sender_id bigint,
    OUT receiver_id bigint, OUT context bigint, OUT priority smallint,
    OUT created_at timestamptz, OUT body bytea, OUT deliveries integer,
    OUT delivery_id bigint, OUT dead_from bigint, OUT failure text, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    -- Since migration 0017: courier_read_v3 without the properties, so the access
    -- lists hold for older middleware too.
    SELECT r.status, r.id, r.queue_id, r.sender_id, r.receiver_id, r.context, r.priority,
           r.created_at, r.body, r.deliveries, r.delivery_id, r.dead_from, r.failure, r.exec_ns
    INTO status, id, queue_id, sender_id, receiver_id, context, priority, created_at, body,
         deliveries, delivery_id, dead_from, failure, exec_ns
    FROM courier_read_v3(p_reader_id, p_queue_id, p_sender_id, p_order, p_pop, p_lease_ms,
                         p_instance_id) r;
END;
$$;

CREATE OR REPLACE FUNCTION courier_pop_response_v2(
    p_reader_id bigint, p_queue_id bigint, p_context bigint,
    OUT status smallint, OUT id bigint, OUT queue_id bigint, OUT sender_id bigint,
    OUT receiver_id bigint, OUT context bigint, OUT priority smallint,
    OUT created_at timestamptz, OUT body bytea, OUT deliveries integer,
    OUT delivery_id bigint, OUT dead_from bigint, OUT failure text, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    -- Since migration 0017: courier_pop_response_v3 without the properties.
    SELECT r.status, r.id, r.queue_id, r.sender_id, r.receiver_id, r.context, r.priority,
           r.created_at, r.body, r.deliveries, r.delivery_id, r.dead_from, r.failure, r.exec_ns
    INTO status, id, queue_id, sender_id, receiver_id, context, priority, created_at, body,
         deliveries, delivery_id, dead_from, failure, exec_ns
    FROM courier_pop_response_v3(p_reader_id, p_queue_id, p_context) r;
END;
$$;

CREATE OR REPLACE FUNCTION courier_pop_batch_v2(p_queue_id bigint, p_order text, p_readers bigint[])
RETURNS TABLE (request integer, status smallint, message text, id bigint, queue_id bigint,
               sender_id bigint, receiver_id bigint, context bigint, priority smallint,
               created_at timestamptz, body bytea, deliveries integer, delivery_id bigint,
               dead_from bigint, failure text, exec_ns bigint)
LANGUAGE plpgsql AS $$
BEGIN
    -- Since migration 0017: courier_pop_batch_v3 without the properties.
    RETURN QUERY
    SELECT p.request, p.status, p.message, p.id, p.queue_id, p.sender_id, p.receiver_id,
           p.context, p.priority, p.created_at, p.body, p.deliveries, p.delivery_id,
           p.dead_from, p.failure, p.exec_ns
    FROM courier_pop_batch_v3(p_queue_id, p_order, p_readers) p;
END;
$$;

CREATE OR REPLACE FUNCTION courier_send_many_v1(
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
    SELECT count(*), bool_or(q.max_messages IS NOT NULL OR q.max_bytes IS NOT NULL
                             OR q.senders IS NOT NULL)  -- send lists: the checked path
    INTO v_found, v_limited
    FROM (SELECT q.max_messages, q.max_bytes, q.senders FROM courier_queues q
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

CREATE OR REPLACE FUNCTION courier_pop_many_v1(
    p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text,
    p_count integer, p_lease_ms integer, p_instance_id bigint)
RETURNS TABLE (id bigint, queue_id bigint, sender_id bigint, receiver_id bigint,
               context bigint, priority smallint, created_at timestamptz, body bytea,
               deliveries integer, delivery_id bigint, dead_from bigint, failure text,
               exec_ns bigint)
LANGUAGE plpgsql AS $$
BEGIN
    -- Since migration 0017: courier_pop_many_v2 without the properties.
    RETURN QUERY
    SELECT p.id, p.queue_id, p.sender_id, p.receiver_id, p.context, p.priority,
           p.created_at, p.body, p.deliveries, p.delivery_id, p.dead_from, p.failure,
           p.exec_ns
    FROM courier_pop_many_v2(p_reader_id, p_queue_id, p_sender_id, p_order, p_count,
                             p_lease_ms, p_instance_id) p;
END;
$$;
