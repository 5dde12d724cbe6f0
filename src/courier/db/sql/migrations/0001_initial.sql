-- Migration 0001: the initial schema (tables, indexes, functions, trigger).
-- The whole current schema, documented, is schema.sql.

-- == Tables ==========================================================================

CREATE TABLE courier_instances (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    address      text        NOT NULL,
    ttl_seconds  double precision NOT NULL CHECK (ttl_seconds > 0),
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE courier_clients (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name                text        NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 255),
    mode                text        NOT NULL CHECK (mode IN ('read_write', 'read_only')),
    -- The instance holding the client's session; NULL when offline. Deleting an
    -- instance releases its sessions.
    session_instance_id bigint      REFERENCES courier_instances (id) ON DELETE SET NULL,
    created_at          timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE courier_queues (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name       text        NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 255),
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE courier_messages (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
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
    body        text        NOT NULL
);

-- == Indexes =========================================================================
-- One per read mode (selector x order), each led by the selector and the audience so
-- a read is two short index probes; the time-ordered queue index also serves
-- queue deletion and per-queue counts.

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
CREATE INDEX courier_clients_session
    ON courier_clients (session_instance_id)
    WHERE session_instance_id IS NOT NULL;

-- == Helpers =========================================================================

-- Raise the custom SQLSTATE CQnnn for wire status nnn.
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
LANGUAGE sql AS $$
    SELECT (extract(epoch FROM clock_timestamp() - p_started) * 1e9)::bigint
$$;

CREATE FUNCTION courier_check_name_v1(p_name text, p_what text)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_name IS NULL OR length(p_name) NOT BETWEEN 1 AND 255 THEN
        PERFORM courier_fail_v1(10, p_what || ' name must be 1 to 255 characters');
    END IF;
END;
$$;

-- == Clients =========================================================================

CREATE FUNCTION courier_register_client_v1(
    p_name text, p_mode text,
    OUT id bigint, OUT name text, OUT mode text, OUT online boolean, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    PERFORM courier_check_name_v1(p_name, 'client');
    IF p_mode IS NULL OR p_mode NOT IN ('read_write', 'read_only') THEN
        PERFORM courier_fail_v1(10, 'client mode must be read_write or read_only');
    END IF;
    INSERT INTO courier_clients (name, mode) VALUES (p_name, p_mode)
    ON CONFLICT (name) DO NOTHING
    RETURNING courier_clients.id, courier_clients.name, courier_clients.mode, false
    INTO id, name, mode, online;
    IF NOT FOUND THEN
        PERFORM courier_fail_v1(7, format('a client named %s exists', p_name));
    END IF;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- By id, or by name when p_id is NULL.
CREATE FUNCTION courier_get_client_v1(
    p_id bigint, p_name text,
    OUT id bigint, OUT name text, OUT mode text, OUT online boolean, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    IF p_id IS NOT NULL THEN
        SELECT c.id, c.name, c.mode, c.session_instance_id IS NOT NULL
        INTO id, name, mode, online
        FROM courier_clients c WHERE c.id = p_id;
    ELSE
        SELECT c.id, c.name, c.mode, c.session_instance_id IS NOT NULL
        INTO id, name, mode, online
        FROM courier_clients c WHERE c.name = p_name;
    END IF;
    IF NOT FOUND THEN
        PERFORM courier_fail_v1(6, format('no client %s', coalesce(p_id::text, p_name)));
    END IF;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- Opens a session held by p_instance_id; one live session per client.
CREATE FUNCTION courier_login_v1(
    p_id bigint, p_name text, p_instance_id bigint,
    OUT id bigint, OUT name text, OUT mode text, OUT online boolean, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
    v_client_id bigint;
BEGIN
    PERFORM 1 FROM courier_instances i WHERE i.id = p_instance_id FOR KEY SHARE;
    IF NOT FOUND THEN
        PERFORM courier_fail_v1(16, format('instance %s is not registered', p_instance_id));
    END IF;
    SELECT g.id INTO v_client_id FROM courier_get_client_v1(p_id, p_name) g;
    UPDATE courier_clients c SET session_instance_id = p_instance_id
    WHERE c.id = v_client_id AND c.session_instance_id IS NULL
    RETURNING c.id, c.name, c.mode, true INTO id, name, mode, online;
    IF NOT FOUND THEN
        PERFORM courier_fail_v1(8, format('client %s is already online', v_client_id));
    END IF;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- Ends the session only if p_instance_id holds it.
CREATE FUNCTION courier_logout_v1(p_client_id bigint, p_instance_id bigint, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    UPDATE courier_clients SET session_instance_id = NULL
    WHERE id = p_client_id AND session_instance_id = p_instance_id;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- == Instances =======================================================================

CREATE FUNCTION courier_register_instance_v1(
    p_address text, p_ttl_seconds double precision,
    OUT id bigint, OUT address text, OUT started_at timestamptz, OUT heartbeat_at timestamptz,
    OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    IF p_ttl_seconds IS NULL OR p_ttl_seconds <= 0 THEN
        PERFORM courier_fail_v1(10, 'instance ttl must be positive');
    END IF;
    INSERT INTO courier_instances (address, ttl_seconds) VALUES (p_address, p_ttl_seconds)
    RETURNING courier_instances.id, courier_instances.address,
              courier_instances.started_at, courier_instances.heartbeat_at
    INTO id, address, started_at, heartbeat_at;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- An expired (deleted) instance must register again: its sessions are gone.
CREATE FUNCTION courier_heartbeat_v1(p_instance_id bigint, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    UPDATE courier_instances SET heartbeat_at = now() WHERE id = p_instance_id;
    IF NOT FOUND THEN
        PERFORM courier_fail_v1(16, format('instance %s is not registered', p_instance_id));
    END IF;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- Live instances (heartbeat younger than their own ttl), ordered by id.
CREATE FUNCTION courier_list_instances_v1(
    OUT ids bigint[], OUT addresses text[], OUT started_ats timestamptz[],
    OUT heartbeat_ats timestamptz[], OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    SELECT coalesce(array_agg(i.id ORDER BY i.id), '{}'),
           coalesce(array_agg(i.address ORDER BY i.id), '{}'),
           coalesce(array_agg(i.started_at ORDER BY i.id), '{}'),
           coalesce(array_agg(i.heartbeat_at ORDER BY i.id), '{}')
    INTO ids, addresses, started_ats, heartbeat_ats
    FROM courier_instances i
    WHERE i.heartbeat_at + make_interval(secs => i.ttl_seconds) > now();
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- Deletes instances whose heartbeat is older than p_ttl_seconds; their sessions are
-- released by the foreign key (ON DELETE SET NULL).
CREATE FUNCTION courier_expire_instances_v1(
    p_ttl_seconds double precision, OUT ids bigint[], OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    WITH expired AS (
        DELETE FROM courier_instances i
        WHERE i.heartbeat_at < now() - make_interval(secs => p_ttl_seconds)
        RETURNING i.id
    )
    SELECT coalesce(array_agg(e.id ORDER BY e.id), '{}') INTO ids FROM expired e;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

CREATE FUNCTION courier_unregister_instance_v1(p_instance_id bigint, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    DELETE FROM courier_instances WHERE id = p_instance_id;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- == Queues ==========================================================================

CREATE FUNCTION courier_create_queue_v1(
    p_name text, OUT id bigint, OUT name text, OUT message_count bigint, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    PERFORM courier_check_name_v1(p_name, 'queue');
    -- ON CONFLICT waits for a concurrent insert of the same name, so of two
    -- concurrent creates exactly one succeeds.
    INSERT INTO courier_queues (name) VALUES (p_name)
    ON CONFLICT (name) DO NOTHING
    RETURNING courier_queues.id, courier_queues.name, 0 INTO id, name, message_count;
    IF NOT FOUND THEN
        PERFORM courier_fail_v1(2, format('queue %s exists', p_name));
    END IF;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- Deletes the queue and its messages; with p_if_empty, refuses while messages remain.
CREATE FUNCTION courier_delete_queue_v1(p_queue_id bigint, p_if_empty boolean, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    -- The row lock conflicts with the key-share locks of concurrent sends.
    PERFORM 1 FROM courier_queues WHERE id = p_queue_id FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM courier_fail_v1(1, format('queue %s does not exist', p_queue_id));
    END IF;
    IF p_if_empty AND EXISTS (SELECT 1 FROM courier_messages m WHERE m.queue_id = p_queue_id) THEN
        PERFORM courier_fail_v1(3, format('queue %s is not empty', p_queue_id));
    END IF;
    DELETE FROM courier_queues WHERE id = p_queue_id;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- By id, or by name when p_id is NULL, with its message count.
CREATE FUNCTION courier_get_queue_v1(
    p_id bigint, p_name text,
    OUT id bigint, OUT name text, OUT message_count bigint, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    IF p_id IS NOT NULL THEN
        SELECT q.id, q.name INTO id, name FROM courier_queues q WHERE q.id = p_id;
    ELSE
        SELECT q.id, q.name INTO id, name FROM courier_queues q WHERE q.name = p_name;
    END IF;
    IF NOT FOUND THEN
        PERFORM courier_fail_v1(1, format('queue %s does not exist', coalesce(p_id::text, p_name)));
    END IF;
    SELECT count(*) INTO message_count FROM courier_messages m
    WHERE m.queue_id = courier_get_queue_v1.id;  -- the OUT parameter, not m.id
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

CREATE FUNCTION courier_list_queues_v1(
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
               (SELECT count(*) FROM courier_messages m WHERE m.queue_id = q.id) AS n
        FROM courier_queues q
    ) c;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- == Messages ========================================================================

-- One independent copy per queue, atomically: all queues exist or nothing is stored.
-- The body limit is a parameter so the configured limit holds inside the database.
CREATE FUNCTION courier_send_v1(
    p_sender_id bigint, p_queue_ids bigint[], p_body text, p_receiver_id bigint,
    p_priority integer, p_context bigint, p_max_body_bytes integer,
    OUT message_ids bigint[], OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
    v_mode text;
    v_size integer := octet_length(p_body);
    v_found bigint;
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
    SELECT c.mode INTO v_mode FROM courier_clients c WHERE c.id = p_sender_id;
    IF NOT FOUND THEN
        PERFORM courier_fail_v1(6, format('no client %s', p_sender_id));
    ELSIF v_mode <> 'read_write' THEN
        PERFORM courier_fail_v1(13, format('client %s is read-only', p_sender_id));
    END IF;
    -- Key-share locks keep the queues from being deleted before the insert.
    SELECT count(*) INTO v_found FROM (
        SELECT 1 FROM courier_queues q WHERE q.id = ANY (p_queue_ids) FOR KEY SHARE
    ) locked;
    IF v_found <> cardinality(p_queue_ids) THEN
        PERFORM courier_fail_v1(1, format('queue %s does not exist', (
            SELECT string_agg(w.id::text, ', ') FROM unnest(p_queue_ids) w(id)
            WHERE NOT EXISTS (SELECT 1 FROM courier_queues q WHERE q.id = w.id))));
    END IF;
    WITH wanted AS (
        SELECT w.queue_id, w.ord FROM unnest(p_queue_ids) WITH ORDINALITY AS w(queue_id, ord)
    ), stored AS (
        INSERT INTO courier_messages (queue_id, sender_id, receiver_id, context, priority, body)
        SELECT w.queue_id, p_sender_id, p_receiver_id, p_context, p_priority, p_body
        FROM wanted w ORDER BY w.ord
        RETURNING courier_messages.id, courier_messages.queue_id
    )
    SELECT array_agg(s.id ORDER BY w.ord) INTO message_ids
    FROM stored s JOIN wanted w ON w.queue_id = s.queue_id;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- The id of the first message visible to p_reader_id (audience 0 or the reader) in
-- one read mode, or NULL; with p_lock, the row is locked for this transaction.
--
-- A pop locks only the row it returns, so a concurrent pop never skips a message
-- that nobody takes. Each round lists, without locks, the first four messages of the
-- mode in read order that were not tried before, merged from the heads of the two
-- audiences (two short probes of the mode's index); a pop then locks the first of
-- them that no other transaction holds (FOR UPDATE SKIP LOCKED, by primary key) and
-- stops there. When all four are held or already gone, the next round lists the next
-- four; a shorter list holds everything visible. A peek takes the head of the first
-- list and locks nothing.
--
-- The six listing statements (selector x order) differ only in filter and sort key,
-- yet stay separate static statements on purpose: PL/pgSQL caches their plans and
-- each walks its own index, whereas one statement with optional filters could not
-- use the right index, and one built with EXECUTE format() is planned on every call.
-- For the same reason the two audiences are a VALUES list and the page size is a
-- literal: as an array or a variable they would be plan parameters of unknown size,
-- the cached generic plan would look dearer than a custom one, and every call would
-- be planned again (tests/integration/db/test_db_indexes.py checks that it is not).
CREATE FUNCTION courier_pick_v1(
    p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text, p_lock boolean)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_tried bigint[] := '{}';  -- listed before, and held by others or gone
    v_ids bigint[];            -- the next four visible messages, in read order
    v_id bigint;
BEGIN
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
                  AND m.id <> ALL (v_tried)
                ORDER BY m.created_at, m.id LIMIT 4) c;
        ELSIF p_queue_id IS NULL THEN
            SELECT (array_agg(c.id ORDER BY c.priority DESC, c.created_at, c.id))[:4] INTO v_ids
            FROM (VALUES (0), (p_reader_id)) a(audience) CROSS JOIN LATERAL (
                SELECT m.id, m.priority, m.created_at FROM courier_messages m
                WHERE m.sender_id = p_sender_id AND m.audience = a.audience
                  AND m.id <> ALL (v_tried)
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

-- Peek or pop one visible message. status is 0 with the message, 5 (QUEUE_EMPTY)
-- when a queue was given and holds nothing visible, 4 (NO_MESSAGE) for a sender-only
-- read that found none.
--
-- A peek picks its message without a lock, so a concurrent pop may delete it before
-- the peek fetches it; the peek then picks again (each statement sees the latest
-- commits). Every lost race means another reader took a message, so a peek loses
-- more than 100 times in a row only to a flood of pops; it then fails (INTERNAL)
-- rather than answer with an empty row.
CREATE FUNCTION courier_read_v1(
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
        v_id := courier_pick_v1(
            p_reader_id, p_queue_id, p_sender_id, p_order, coalesce(p_pop, false));
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

-- Pop the oldest message in the queue addressed to the reader with this context.
-- status is 0 with the message or 4 (NO_MESSAGE).
CREATE FUNCTION courier_pop_response_v1(
    p_reader_id bigint, p_queue_id bigint, p_context bigint,
    OUT status smallint, OUT id bigint, OUT queue_id bigint, OUT sender_id bigint,
    OUT receiver_id bigint, OUT context bigint, OUT priority smallint,
    OUT created_at timestamptz, OUT body text, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    DELETE FROM courier_messages m WHERE m.id = (
        SELECT r.id FROM courier_messages r
        WHERE r.queue_id = p_queue_id AND r.receiver_id = p_reader_id AND r.context = p_context
        ORDER BY r.created_at, r.id LIMIT 1 FOR UPDATE SKIP LOCKED)
    RETURNING 0, m.id, m.queue_id, m.sender_id, m.receiver_id, m.context, m.priority,
              m.created_at, m.body
    INTO status, id, queue_id, sender_id, receiver_id, context, priority, created_at, body;
    IF NOT FOUND THEN
        IF NOT EXISTS (SELECT 1 FROM courier_queues q WHERE q.id = p_queue_id) THEN
            PERFORM courier_fail_v1(1, format('queue %s does not exist', p_queue_id));
        END IF;
        status := 4;
    END IF;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- Queues (by id) holding a message the reader could read, with how many.
CREATE FUNCTION courier_queues_for_me_v1(
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
    ) c
    WHERE c.n > 0;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- == Triggers ========================================================================

CREATE FUNCTION courier_notify_message_v1()
RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('courier_messages',
                      NEW.queue_id::text || ':' || coalesce(NEW.receiver_id::text, ''));
    RETURN NULL;
END;
$$;

CREATE TRIGGER courier_messages_notify
    AFTER INSERT ON courier_messages
    FOR EACH ROW EXECUTE FUNCTION courier_notify_message_v1();
