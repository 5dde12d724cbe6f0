-- Courier's whole current schema: tables, indexes, stored functions, triggers.
--
-- Applying every file in migrations/ in order must yield exactly this schema
-- (tests/integration/db/test_db_migrations.py holds them equal).
--
-- Every operation is one stored function with a versioned name (*_v1), so old and
-- new middleware can run side by side during an upgrade. Each function returns one
-- row whose last column, exec_ns, is its own execution time inside the database;
-- the batch functions (migration 0003) return one row per request of the batch, each
-- with the batch's exec_ns, and a status instead of raising.
--
-- Failures a user can cause are raised with a custom SQLSTATE of class CQ whose
-- number is the wire status code (courier.errors.Status):
--   CQ001 QUEUE_NOT_FOUND   CQ002 QUEUE_EXISTS     CQ003 QUEUE_NOT_EMPTY
--   CQ004 NO_MESSAGE        CQ005 QUEUE_EMPTY      CQ006 CLIENT_NOT_FOUND
--   CQ007 CLIENT_EXISTS     CQ008 CLIENT_ONLINE    CQ010 BAD_REQUEST
--   CQ011 INVALID_PRIORITY  CQ012 PAYLOAD_TOO_LARGE CQ013 NOT_AUTHORISED
--   CQ016 INTERNAL          CQ017 LEASE_EXPIRED    CQ018 QUOTA_EXCEEDED
--   CQ048 TOPIC_NOT_FOUND   CQ049 TOPIC_EXISTS     CQ050 TRANSACTION_EXPIRED
-- The frequent misses of a read (NO_MESSAGE, QUEUE_EMPTY) are not raised: they come
-- back in the result's status column, which keeps them cheap and still timed.
--
-- Notification channel: every statement that stores messages in a queue a middleware
-- watches (courier_watch_queue_v1; any queue while a middleware older than migration
-- 0034 is registered) fires, per distinct queue and receiver,
-- pg_notify('courier_messages', '<queue_id>:<receiver_id or empty>:<messages stored>')
-- (delivered at commit), so middleware can wake as many blocked receives as those
-- messages can satisfy.
-- Disabling a client (migration 0013) fires pg_notify('courier_clients', '<client_id>'),
-- so the middleware holding its session closes that connection.

-- == Tables ==========================================================================

CREATE TABLE courier_instances (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    address      text        NOT NULL,
    ttl_seconds  double precision NOT NULL CHECK (ttl_seconds > 0),
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    -- Whether the instance watches the queues it waits on (migration 0034): while
    -- one that does not is registered, every statement storing messages notifies.
    watches_queues boolean   NOT NULL DEFAULT false
);

CREATE INDEX courier_instances_not_watching ON courier_instances (id) WHERE NOT watches_queues;

-- The queues a middleware waits on (migration 0034): until "until", statements that
-- store messages in one notify (see courier_watch_queue_v1).
CREATE TABLE courier_queue_watches (
    queue_id bigint      PRIMARY KEY,
    until    timestamptz NOT NULL
);

CREATE INDEX courier_queue_watches_until ON courier_queue_watches (until);

CREATE TABLE courier_clients (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name                text        NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 255),
    mode                text        NOT NULL CHECK (mode IN ('read_write', 'read_only')),
    -- The instance holding the client's session; NULL when offline. Deleting an
    -- instance releases its sessions.
    session_instance_id bigint      REFERENCES courier_instances (id) ON DELETE SET NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    -- An admin (a read_write client that may do anything) and a disabled client
    -- (which cannot log in); migration 0013.
    admin               boolean     NOT NULL DEFAULT false,
    disabled            boolean     NOT NULL DEFAULT false,
    -- The SCRAM-SHA-256 verifier of the client's secret, never the secret itself; NULL
    -- when no secret is set (see migration 0013).
    auth_salt           bytea,
    auth_iterations     integer     CHECK (auth_iterations >= 4096),
    auth_stored_key     bytea       CHECK (length(auth_stored_key) = 32),
    auth_server_key     bytea       CHECK (length(auth_server_key) = 32)
);

-- What a queue does with messages that fail: after max_deliveries leases a message
-- moves to the dead-letter queue (dropped without one); with dead_letter_expired an
-- expired message moves there too instead of being dropped.
CREATE TABLE courier_queues (
    id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name                 text        NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 255),
    created_at           timestamptz NOT NULL DEFAULT now(),
    max_deliveries       integer     CHECK (max_deliveries > 0),
    dead_letter_queue_id bigint      REFERENCES courier_queues (id) ON DELETE SET NULL,
    dead_letter_expired  boolean     NOT NULL DEFAULT false,
    created_by           bigint      REFERENCES courier_clients (id) ON DELETE SET NULL,
    max_messages         integer     CHECK (max_messages > 0),
    max_bytes            bigint      CHECK (max_bytes > 0),
    overflow             text        NOT NULL DEFAULT 'refuse'
                                     CHECK (overflow IN ('refuse', 'drop_oldest'))
);

-- Messages ready to be read, in two partitions by persistence: a persistent message
-- is written to the write-ahead log like any row; a non-persistent one lives in an
-- UNLOGGED partition, which costs no log writes and is emptied by crash recovery.
-- Reads name the parent, so one index walk (a merge of both partitions' indexes)
-- takes the best message of either kind.
CREATE TABLE courier_messages (
    id          bigint GENERATED ALWAYS AS IDENTITY,
    -- Its queue and its sender exist: courier_messages_stored_v1 checks them once per
    -- statement, where foreign keys checked them per row (migrations 0036, 0037), and
    -- deleting a queue deletes its messages (courier_drop_queue_messages_v1).
    queue_id    bigint      NOT NULL,
    sender_id   bigint      NOT NULL,
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

-- Messages stored but not visible: leased (delivery_id set) or delayed. A pop never
-- looks here, so the hot table and its walks stay as they were; a message comes back
-- to courier_messages, with its id and time, when it becomes visible again.
CREATE TABLE courier_held_messages (
    id          bigint      PRIMARY KEY,
    queue_id    bigint      NOT NULL REFERENCES courier_queues (id) ON DELETE CASCADE,
    sender_id   bigint      NOT NULL REFERENCES courier_clients (id),
    receiver_id bigint,
    context     bigint,
    priority    smallint    NOT NULL,
    created_at  timestamptz NOT NULL,
    body        bytea       NOT NULL,
    deliveries  integer     NOT NULL,
    expires_at  timestamptz,
    dead_from   bigint,
    failure     text,
    -- When the message is due back (the lease's end, or the delay's).
    visible_at  timestamptz NOT NULL,
    -- The lease: its id, the client holding it and the middleware it came through.
    delivery_id bigint      UNIQUE,
    holder_id   bigint,
    instance_id bigint,
    properties  jsonb,
    persistent  boolean     NOT NULL DEFAULT true
) WITH (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 2000,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 2000,
    autovacuum_vacuum_cost_delay = 0
);

CREATE INDEX courier_held_messages_due ON courier_held_messages (visible_at);
CREATE INDEX courier_held_messages_queue ON courier_held_messages (queue_id);
CREATE INDEX courier_held_messages_holder ON courier_held_messages (holder_id, instance_id)
    WHERE delivery_id IS NOT NULL;
CREATE INDEX courier_held_messages_instance ON courier_held_messages (instance_id)
    WHERE instance_id IS NOT NULL;

CREATE SEQUENCE courier_delivery_ids;

-- Sends with a dedup id, per sender, for the dedup window: a retry answers with the
-- ids stored the first time.
CREATE TABLE courier_dedup (
    sender_id   bigint      NOT NULL,
    dedup_id    text        NOT NULL,
    message_ids bigint[]    NOT NULL,
    stored_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (sender_id, dedup_id)
);

CREATE INDEX courier_dedup_age ON courier_dedup (stored_at);

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
CREATE INDEX courier_messages_expiry ON courier_messages (expires_at)
    WHERE expires_at IS NOT NULL;

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

-- Opens a session held by p_instance_id; one live session per client. A session
-- held by an instance that is gone is taken over (the instance is removed first), so
-- a client whose middleware died logs in on a survivor at once.
CREATE FUNCTION courier_login_v1(
    p_id bigint, p_name text, p_instance_id bigint,
    OUT id bigint, OUT name text, OUT mode text, OUT online boolean, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
    v_client_id bigint;
    v_holder bigint;
BEGIN
    PERFORM 1 FROM courier_instances i WHERE i.id = p_instance_id FOR KEY SHARE;
    IF NOT FOUND THEN
        PERFORM courier_fail_v1(16, format('instance %s is not registered', p_instance_id));
    END IF;
    SELECT g.id INTO v_client_id FROM courier_get_client_v1(p_id, p_name) g;
    SELECT c.session_instance_id INTO v_holder FROM courier_clients c WHERE c.id = v_client_id;
    IF v_holder <> p_instance_id AND courier_instance_dead_v1(v_holder) THEN
        PERFORM courier_unregister_instance_v1(v_holder);
    END IF;
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

-- courier_register_instance_v1 for a middleware that watches the queues it waits on.
CREATE FUNCTION courier_register_instance_v2(
    p_address text, p_ttl_seconds double precision,
    OUT id bigint, OUT address text, OUT started_at timestamptz, OUT heartbeat_at timestamptz,
    OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    SELECT r.id, r.address, r.started_at, r.heartbeat_at
    INTO id, address, started_at, heartbeat_at
    FROM courier_register_instance_v1(p_address, p_ttl_seconds) r;
    UPDATE courier_instances i SET watches_queues = true
    WHERE i.id = courier_register_instance_v2.id;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- Statements that store messages in p_queue_id notify for p_seconds more at least;
-- watched is false when the watch could not be made within p_wait_ms (the caller
-- then polls). Every such statement holds the queue's watch lock (advisory, class
-- 1131377779, shared) from before it looks for watches until it commits. A new watch
-- (or one that would end within ten seconds) takes that lock exclusively, which waits
-- for those statements to commit and holds back the ones after it: a read that
-- follows this call sees the messages of the first, and the others see the watch, so
-- no message falls between the two. (The lock manager queues the shared requests
-- behind a waiting exclusive one, so a busy queue cannot starve a watch; waiting at
-- most p_wait_ms (below a second), a watch also never stays in a cycle of waits long
-- enough for a send to be taken for a deadlock.) A watch with longer to run is only
-- extended: every statement already sees it. A queue that does not exist gets no watch (the read
-- after the call says so).
CREATE FUNCTION courier_watch_queue_v1(
    p_queue_id bigint, p_seconds double precision, p_wait_ms integer,
    OUT watched boolean, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
    v_lock_timeout text := current_setting('lock_timeout');
    v_until timestamptz;
BEGIN
    IF p_seconds IS NULL OR p_seconds <= 10 OR p_seconds > 3600 THEN
        PERFORM courier_fail_v1(10, 'a watch lasts more than 10 s and at most an hour');
    END IF;
    IF p_wait_ms IS NULL OR p_wait_ms < 1 OR p_wait_ms > 60000 THEN
        PERFORM courier_fail_v1(10, 'a watch waits from 1 ms to a minute');
    END IF;
    watched := true;
    SELECT w.until INTO v_until FROM courier_queue_watches w WHERE w.queue_id = p_queue_id;
    IF v_until IS NULL OR v_until < clock_timestamp() + interval '10 seconds' THEN
        PERFORM set_config('lock_timeout', p_wait_ms || 'ms', true);
        BEGIN
            PERFORM pg_advisory_xact_lock(1131377779, (p_queue_id % 2147483648)::integer);
        EXCEPTION WHEN lock_not_available THEN
            watched := false;
        END;
        PERFORM set_config('lock_timeout', v_lock_timeout, true);
        IF NOT watched OR NOT EXISTS (SELECT FROM courier_queues q WHERE q.id = p_queue_id) THEN
            exec_ns := courier_elapsed_ns_v1(v_started);
            RETURN;
        END IF;
    END IF;
    INSERT INTO courier_queue_watches AS w (queue_id, until)
    VALUES (p_queue_id, clock_timestamp() + make_interval(secs => p_seconds))
    ON CONFLICT (queue_id) DO UPDATE SET until = greatest(w.until, excluded.until);
    -- Watches of deleted queues, and of queues nobody waits on any more, end here, a
    -- few at a time (those another watch is renewing are left to it).
    DELETE FROM courier_queue_watches w WHERE w.queue_id IN (
        SELECT o.queue_id FROM courier_queue_watches o
        WHERE o.until < clock_timestamp() - interval '1 hour'
        ORDER BY o.until LIMIT 16 FOR UPDATE SKIP LOCKED);
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
-- released by the foreign key (ON DELETE SET NULL), their leases here.
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
    PERFORM courier_release_instance_leases_v1(ids);
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- Deletes the instances whose heartbeat is older than their own ttl, releasing
-- their sessions (by the foreign key) and their leases.
CREATE FUNCTION courier_expire_instances_v2(OUT ids bigint[], OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    WITH expired AS (
        DELETE FROM courier_instances i
        WHERE i.heartbeat_at < now() - make_interval(secs => i.ttl_seconds)
        RETURNING i.id
    )
    SELECT coalesce(array_agg(e.id ORDER BY e.id), '{}') INTO ids FROM expired e;
    PERFORM courier_release_instance_leases_v1(ids);
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

CREATE FUNCTION courier_unregister_instance_v1(
    p_instance_id bigint, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    DELETE FROM courier_instances WHERE id = p_instance_id;
    PERFORM courier_release_instance_leases_v1(ARRAY[p_instance_id]);
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- Every live middleware holds the session-level advisory lock
-- (1131377778, <its instance id modulo 2^31>) on its LISTEN connection. A process that dies loses
-- its connections, and with them the lock, at once; so a lock anyone can take means
-- the instance is gone. Nobody holds any lock for a while after the database itself
-- restarts, and a new instance takes its lock a moment after registering: the first
-- three seconds of the database and the first second of an instance are a grace
-- during which only the heartbeat ttl counts.
CREATE FUNCTION courier_instance_dead_v1(p_instance_id bigint)
RETURNS boolean
LANGUAGE sql AS $$
    SELECT greatest(pg_postmaster_start_time() + interval '3 seconds',
                    i.started_at + interval '1 second') < clock_timestamp()
           AND pg_try_advisory_xact_lock(1131377778, (p_instance_id % 2147483648)::integer)
    FROM courier_instances i WHERE i.id = p_instance_id
$$;

-- Removes the other instances that are gone (see courier_instance_dead_v1): their
-- sessions are released by the foreign key, their leases here.
CREATE FUNCTION courier_reap_instances_v1(
    p_instance_id bigint, OUT ids bigint[], OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    WITH dead AS (
        DELETE FROM courier_instances i
        WHERE i.id <> p_instance_id AND courier_instance_dead_v1(i.id)
        RETURNING i.id
    )
    SELECT coalesce(array_agg(d.id ORDER BY d.id), '{}') INTO ids FROM dead d;
    PERFORM courier_release_instance_leases_v1(ids);
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

-- Deletes the queue and its messages, held ones too; with p_if_empty, refuses while
-- messages remain, held ones included.
CREATE FUNCTION courier_delete_queue_v1(
    p_queue_id bigint, p_if_empty boolean, OUT exec_ns bigint)
LANGUAGE plpgsql
-- Plan once (migration 0035): for statements on the partitioned messages table the
-- planner judged a custom plan cheaper every time, and planned each delete afresh,
-- the cascade to the queue's messages included (it runs under these settings).
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    -- The row lock conflicts with the key-share locks of concurrent sends.
    PERFORM 1 FROM courier_queues WHERE id = p_queue_id FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM courier_fail_v1(1, format('queue %s does not exist', p_queue_id));
    END IF;
    IF p_if_empty AND (
        EXISTS (SELECT 1 FROM courier_messages m WHERE m.queue_id = p_queue_id)
        OR EXISTS (SELECT 1 FROM courier_held_messages h WHERE h.queue_id = p_queue_id)) THEN
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
-- With few messages in the table the planner still judged a custom plan cheaper and
-- planned every call (0.3 ms a call, against 0.04 on the generic plan), so the
-- function pins its plans generic (migration 0039).
CREATE FUNCTION courier_pick_v1(
    p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text, p_lock boolean)
RETURNS bigint
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan  -- migration 0039
AS $$
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
        WHERE q.readers IS NULL OR courier_allows_v1(p_reader_id, q.created_by, q.readers)
    ) c
    WHERE c.n > 0;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- == Batched data path (migration 0003) =============================================
-- A middleware coalesces the sends that arrive together into one call, and the pops
-- of one queue into another. Each request in a batch gets its own status (the wire
-- status code, 0 for OK) and message: a bad request never fails the others, so these
-- functions check instead of raising.

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

-- == Delivery (migration 0004) ===================================================

-- == Moving messages between states ==================================================

-- A held message (locked by the caller) leaves the held table: back to its queue,
-- held again after p_delay_ms, or, when it expired or ran out of deliveries, to the
-- dead-letter queue or gone. p_failure, when given, is remembered as the reason.
-- Returns what happened: 'visible', 'delayed', 'dead', 'dropped'.
CREATE FUNCTION courier_settle_v1(p_id bigint, p_delay_ms integer, p_failure text)
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

-- A message just taken from courier_messages (deleted by the caller) becomes a
-- delivery leased to p_holder_id through p_instance_id for p_lease_ms.
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

-- A message nobody took before its ttl: gone, or a dead letter when its queue says so.
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

-- == Messages ========================================================================

-- One independent copy per queue, atomically: all queues exist or nothing is stored.
-- The body limit is a parameter so the configured limit holds inside the database.
-- With p_delay_ms the copies stay invisible that long; with p_ttl_ms they expire if
-- nobody took them in time. With p_dedup_id, a send of the same sender and dedup id
-- within p_dedup_window_ms stores nothing and answers with the first send's ids.
CREATE FUNCTION courier_send_v2(
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

-- Peek or pop one visible message: a pop by queue alone takes its row in one
-- skip-locked walk (courier_take_one_v1), other reads pick it (courier_pick_v1).
-- status is 0 with the message, 5 (QUEUE_EMPTY) when a queue was given and holds
-- nothing visible, 4 (NO_MESSAGE) for a sender-only read that found none.
--
-- A pop with p_lease_ms > 0 leases the message instead of deleting it: it stays
-- stored, invisible, until acknowledged, released, or the lease runs out, and the
-- answer carries its delivery id and count.
--
-- A peek picks its message without a lock, so a concurrent pop may delete it before
-- the peek fetches it; the peek then picks again (each statement sees the latest
-- commits). Every lost race means another reader took a message, so a peek loses
-- more than 100 times in a row only to a flood of pops; it then fails (INTERNAL)
-- rather than answer with an empty row.
CREATE FUNCTION courier_read_v2(
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

-- Pop the oldest message in the queue addressed to the reader with this context.
-- status is 0 with the message or 4 (NO_MESSAGE).
CREATE FUNCTION courier_pop_response_v2(
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

-- == Leases ==========================================================================
-- A delivery is acknowledged, released or extended only by the client it was leased
-- to; LEASE_EXPIRED (CQ017) when it is no longer held: its lease ran out (it may be
-- with another reader now), or it was acknowledged or released already.

CREATE FUNCTION courier_held_delivery_v1(p_holder_id bigint, p_delivery_id bigint)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
BEGIN
    SELECT h.id INTO v_id FROM courier_held_messages h
    WHERE h.delivery_id = p_delivery_id AND h.holder_id = p_holder_id
    FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM courier_fail_v1(17, format(
            'delivery %s is not held: its lease ran out, or it was acknowledged or released',
            p_delivery_id));
    END IF;
    RETURN v_id;
END;
$$;

CREATE FUNCTION courier_ack_v1(p_holder_id bigint, p_delivery_id bigint, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
    v_id bigint := courier_held_delivery_v1(p_holder_id, p_delivery_id);
BEGIN
    DELETE FROM courier_held_messages h WHERE h.id = v_id;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- Gives the message back: visible again after p_delay_ms, or a dead letter once it
-- has had its queue's max_deliveries.
CREATE FUNCTION courier_nack_v1(
    p_holder_id bigint, p_delivery_id bigint, p_delay_ms integer, p_reason text,
    OUT outcome text, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    IF p_delay_ms IS NULL OR p_delay_ms < 0 THEN
        PERFORM courier_fail_v1(10, format('delay %s ms is negative', p_delay_ms));
    END IF;
    outcome := courier_settle_v1(
        courier_held_delivery_v1(p_holder_id, p_delivery_id), p_delay_ms, p_reason);
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

CREATE FUNCTION courier_extend_v1(
    p_holder_id bigint, p_delivery_id bigint, p_lease_ms integer, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
    v_id bigint;
BEGIN
    IF p_lease_ms IS NULL OR p_lease_ms <= 0 THEN
        PERFORM courier_fail_v1(10, format('lease %s ms is not positive', p_lease_ms));
    END IF;
    v_id := courier_held_delivery_v1(p_holder_id, p_delivery_id);
    UPDATE courier_held_messages h
    SET visible_at = clock_timestamp() + make_interval(secs => p_lease_ms / 1000.0)
    WHERE h.id = v_id;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- A receiver that gave up gets nothing: the message its pop took goes back as it was.
-- A leased one leaves the held table with its delivery uncounted; a plain pop's
-- (already deleted) is stored again with its id and time, if its queue still exists.
CREATE FUNCTION courier_unlease_v1(p_holder_id bigint, p_delivery_id bigint, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
    v_id bigint;
BEGIN
    SELECT h.id INTO v_id FROM courier_held_messages h
    WHERE h.delivery_id = p_delivery_id AND h.holder_id = p_holder_id FOR UPDATE;
    IF FOUND THEN
        UPDATE courier_held_messages h SET deliveries = h.deliveries - 1 WHERE h.id = v_id;
        PERFORM courier_settle_v1(v_id, 0, NULL);
    END IF;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

CREATE FUNCTION courier_restore_v1(
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

-- Releases every lease p_holder_id holds through p_instance_id (its session ended).
CREATE FUNCTION courier_release_leases_v1(
    p_holder_id bigint, p_instance_id bigint, p_reason text,
    OUT released integer, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    SELECT count(courier_settle_v1(h.id, 0, p_reason)) INTO released
    FROM (SELECT h.id FROM courier_held_messages h
          WHERE h.holder_id = p_holder_id AND h.instance_id = p_instance_id
            AND h.delivery_id IS NOT NULL
          ORDER BY h.id FOR UPDATE) h;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- Releases every lease held through the given (stopped or dead) instances.
CREATE FUNCTION courier_release_instance_leases_v1(p_instance_ids bigint[])
RETURNS integer
LANGUAGE sql AS $$
    SELECT count(courier_settle_v1(h.id, 0, 'the middleware holding the lease stopped'))::integer
    FROM (SELECT h.id FROM courier_held_messages h
          WHERE h.instance_id = ANY (p_instance_ids) ORDER BY h.id FOR UPDATE) h
$$;

-- Everything due, up to p_limit rows of each kind: held messages whose lease or delay
-- ended come back (or become dead letters), messages past their ttl expire, and dedup
-- entries older than the window are forgotten. next_due says when to sweep again.
-- Rows another sweeper holds are skipped, so any number of middleware may sweep.
CREATE FUNCTION courier_sweep_v1(
    p_limit integer, p_dedup_window_ms integer,
    OUT returned integer, OUT expired integer, OUT next_due timestamptz, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    SELECT count(courier_settle_v1(h.id, 0,
                 CASE WHEN h.delivery_id IS NOT NULL THEN 'lease expired' END))
    INTO returned
    FROM (SELECT h.id, h.delivery_id FROM courier_held_messages h
          WHERE h.visible_at <= v_started
          ORDER BY h.visible_at LIMIT p_limit FOR UPDATE SKIP LOCKED) h;
    SELECT count(courier_expire_v1(m)) INTO expired
    FROM (SELECT m.* FROM courier_messages m
          WHERE m.expires_at <= v_started
          ORDER BY m.expires_at LIMIT p_limit FOR UPDATE SKIP LOCKED) m;
    DELETE FROM courier_dedup d
    WHERE d.stored_at < v_started - make_interval(secs => p_dedup_window_ms / 1000.0);
    next_due := least(
        (SELECT min(h.visible_at) FROM courier_held_messages h),
        (SELECT min(m.expires_at) FROM courier_messages m WHERE m.expires_at IS NOT NULL));
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- == Dead letters ====================================================================

CREATE FUNCTION courier_configure_queue_v1(
    p_queue_id bigint, p_max_deliveries integer, p_dead_letter_queue_id bigint,
    p_dead_letter_expired boolean,
    OUT queue_id bigint, OUT max_deliveries integer, OUT dead_letter_queue_id bigint,
    OUT dead_letter_expired boolean, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    IF p_max_deliveries <= 0 THEN
        PERFORM courier_fail_v1(10, 'max_deliveries must be positive');
    END IF;
    IF p_dead_letter_queue_id = p_queue_id THEN
        PERFORM courier_fail_v1(10, 'a queue cannot be its own dead-letter queue');
    END IF;
    IF p_dead_letter_queue_id IS NOT NULL
       AND NOT EXISTS (SELECT FROM courier_queues q WHERE q.id = p_dead_letter_queue_id) THEN
        PERFORM courier_fail_v1(1, format('queue %s does not exist', p_dead_letter_queue_id));
    END IF;
    UPDATE courier_queues q
    SET max_deliveries = p_max_deliveries, dead_letter_queue_id = p_dead_letter_queue_id,
        dead_letter_expired = coalesce(p_dead_letter_expired, false)
    WHERE q.id = p_queue_id
    RETURNING q.id, q.max_deliveries, q.dead_letter_queue_id, q.dead_letter_expired
    INTO queue_id, max_deliveries, dead_letter_queue_id, dead_letter_expired;
    IF NOT FOUND THEN
        PERFORM courier_fail_v1(1, format('queue %s does not exist', p_queue_id));
    END IF;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- Moves dead letters of p_queue_id back to the queues they failed in, with a fresh
-- delivery count: the given messages, or all of them when p_message_ids is NULL.
-- Dead letters whose queue is gone stay.
CREATE FUNCTION courier_redrive_v1(
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

-- == Batched data path, with bytes ==================================================
-- As in migration 0003, with binary bodies and delivery columns. Leased pops and sends
-- with options go one by one through courier_read_v2 and courier_send_v2.

CREATE FUNCTION courier_send_batch_v2(
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

CREATE FUNCTION courier_pop_batch_v2(p_queue_id bigint, p_order text, p_readers bigint[])
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

-- Everything a middleware has waiting, in one call and one commit: the acks first
-- (set-based; LEASE_EXPIRED for a delivery the client does not hold), then the sends
-- (courier_send_batch_v2), then the plain pops by queue of each (queue, order)
-- together (courier_pop_batch_v2), then every other read one by one
-- (courier_read_v2: peeks, pops by sender, and leased pops, with p_read_leases and
-- the instance they come through). The pops by queue come grouped: all pops of one
-- queue in one order stand next to each other, the groups in the order they are to
-- be served. Request numbers are the caller's; one row per request, with
-- message_ids for a send and the message columns for a read. A read that fails for
-- a reason of its own (a missing queue) answers with that status alone.
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
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
    v_pops integer := coalesce(cardinality(p_pop_requests), 0);
    v_first integer := 1;  -- where the current group of pops starts
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
               NULL::bigint, NULL::bigint, NULL::text, courier_elapsed_ns_v1(v_started)
        FROM wanted w LEFT JOIN acked a ON a.n = w.n;
    END IF;
    IF cardinality(p_send_requests) > 0 THEN
        RETURN QUERY
        SELECT p_send_requests[s.request], s.status, s.message, s.message_ids, NULL::bigint,
               NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::smallint,
               NULL::timestamptz, NULL::bytea, NULL::integer, NULL::bigint, NULL::bigint,
               NULL::text, s.exec_ns
        FROM courier_send_batch_v2(p_senders, p_bodies, p_receivers, p_priorities, p_contexts,
                                   p_copy_sends, p_copy_queues, p_max_body_bytes) s;
    END IF;
    FOR v_last IN 1..v_pops LOOP
        CONTINUE WHEN v_last < v_pops AND p_pop_queues[v_last + 1] = p_pop_queues[v_last]
                      AND p_pop_orders[v_last + 1] = p_pop_orders[v_last];
        RETURN QUERY
        SELECT p_pop_requests[v_first - 1 + p.request], p.status, p.message, NULL::bigint[],
               p.id, p.queue_id, p.sender_id, p.receiver_id, p.context, p.priority,
               p.created_at, p.body, p.deliveries, p.delivery_id, p.dead_from, p.failure,
               p.exec_ns
        FROM courier_pop_batch_v2(p_pop_queues[v_last], p_pop_orders[v_last],
                                  p_pop_readers[v_first:v_last]) p;
        v_first := v_last + 1;
    END LOOP;
    FOR v_i IN 1..coalesce(cardinality(p_read_requests), 0) LOOP
        BEGIN
            RETURN QUERY
            SELECT p_read_requests[v_i], r.status, NULL::text, NULL::bigint[], r.id,
                   r.queue_id, r.sender_id, r.receiver_id, r.context, r.priority,
                   r.created_at, r.body, r.deliveries, r.delivery_id, r.dead_from, r.failure,
                   r.exec_ns
            FROM courier_read_v2(p_read_readers[v_i], p_read_queues[v_i], p_read_senders[v_i],
                                 p_read_orders[v_i], p_read_pops[v_i],
                                 coalesce(p_read_leases[v_i], 0), p_read_instances[v_i]) r;
        EXCEPTION WHEN OTHERS THEN
            -- A read a client got wrong (a missing queue) fails alone, undone whole;
            -- anything else fails the call.
            IF SQLSTATE NOT LIKE 'CQ%' THEN
                RAISE;
            END IF;
            RETURN QUERY
            SELECT p_read_requests[v_i], substr(SQLSTATE, 3)::smallint, SQLERRM,
                   NULL::bigint[], NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,
                   NULL::bigint, NULL::smallint, NULL::timestamptz, NULL::bytea,
                   NULL::integer, NULL::bigint, NULL::bigint, NULL::text, 0::bigint;
        END;
    END LOOP;
END;
$$;

-- One such send, as courier_send_v2 takes it; request is the caller's number.
CREATE TYPE courier_option_send_v1 AS (
    request integer, sender_id bigint, queue_ids bigint[], body bytea, receiver_id bigint,
    priority integer, context bigint, delay_ms integer, ttl_ms integer, dedup_id text);

-- courier_exchange_v2, with p_option_sends stored one by one (courier_send_v2) right
-- after the plain sends: acks, plain sends, option sends, pops, other reads. A send
-- a client got wrong (a missing queue) fails alone, undone whole; anything else
-- fails the call. The caller orders sends with a dedup id by (sender, id), so two
-- batches that share ids lock them in the same order and cannot deadlock.
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
LANGUAGE plpgsql AS $$
DECLARE
    v_send courier_option_send_v1;
BEGIN
    IF cardinality(p_ack_requests) > 0 OR cardinality(p_send_requests) > 0 THEN
        RETURN QUERY
        SELECT * FROM courier_exchange_v2(
            p_send_requests, p_senders, p_bodies, p_receivers, p_priorities, p_contexts,
            p_copy_sends, p_copy_queues, p_max_body_bytes,
            '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}',
            p_ack_requests, p_ack_holders, p_ack_deliveries);
    END IF;
    FOREACH v_send IN ARRAY coalesce(p_option_sends, '{}') LOOP
        BEGIN
            RETURN QUERY
            SELECT v_send.request, 0::smallint, NULL::text, s.message_ids, NULL::bigint,
                   NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::smallint,
                   NULL::timestamptz, NULL::bytea, NULL::integer, NULL::bigint,
                   NULL::bigint, NULL::text, s.exec_ns
            FROM courier_send_v2(v_send.sender_id, v_send.queue_ids, v_send.body,
                                 v_send.receiver_id, v_send.priority, v_send.context,
                                 p_max_body_bytes, v_send.delay_ms, v_send.ttl_ms,
                                 v_send.dedup_id, p_dedup_window_ms) s;
        EXCEPTION WHEN OTHERS THEN
            IF SQLSTATE NOT LIKE 'CQ%' THEN
                RAISE;
            END IF;
            RETURN QUERY
            SELECT v_send.request, substr(SQLSTATE, 3)::smallint, SQLERRM, NULL::bigint[],
                   NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,
                   NULL::smallint, NULL::timestamptz, NULL::bytea, NULL::integer,
                   NULL::bigint, NULL::bigint, NULL::text, 0::bigint;
        END;
    END LOOP;
    IF cardinality(p_pop_requests) > 0 OR cardinality(p_read_requests) > 0 THEN
        RETURN QUERY
        SELECT * FROM courier_exchange_v2(
            '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', p_max_body_bytes,
            p_pop_requests, p_pop_queues, p_pop_orders, p_pop_readers,
            p_read_requests, p_read_readers, p_read_queues, p_read_senders, p_read_orders,
            p_read_pops, p_read_leases, p_read_instances, '{}', '{}', '{}');
    END IF;
END;
$$;

-- == Triggers ========================================================================

-- One notification per distinct (queue, receiver) a statement stored, with its count
-- (migration 0008), not one per row.
CREATE FUNCTION courier_notify_messages_v3()
RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('courier_messages',
                      s.queue_id::text || ':' || coalesce(s.receiver_id::text, '') || ':'
                      || s.stored::text)
    FROM (SELECT n.queue_id, n.receiver_id, count(*) AS stored
          FROM stored_messages n GROUP BY n.queue_id, n.receiver_id) s;
    RETURN NULL;
END;
$$;

-- Announcing only the watched queues (migration 0034), and checking each stored
-- message's queue and sender once per statement (migration 0036), are done by
-- courier_messages_stored_v1 (migration 0037, at the end of this file).

-- A deleted queue's messages go with it (what ON DELETE CASCADE did; migration 0036).
CREATE FUNCTION courier_drop_queue_messages_v1()
RETURNS trigger
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan  -- see courier_delete_queue_v1 (migration 0035)
AS $$
BEGIN
    DELETE FROM courier_messages m WHERE m.queue_id = OLD.id;
    RETURN NULL;
END;
$$;

CREATE TRIGGER courier_queues_messages
    AFTER DELETE ON courier_queues
    FOR EACH ROW EXECUTE FUNCTION courier_drop_queue_messages_v1();

-- == Console (migration 0002) ========================================================

-- The console pages through messages by id (keyset pagination) per queue, per
-- sender and per receiver, and counts them with a cap; these indexes keep every one
-- of those queries a short index walk. The queue index carries the columns a
-- filtered queue page tests and the oldest message's time, so those walks need not
-- visit the table. A view joins the names the console shows, and a stored function
-- deletes one message for an admin.

CREATE INDEX courier_messages_console_queue
    ON courier_messages (queue_id, id)
    INCLUDE (sender_id, receiver_id, priority, created_at);
CREATE INDEX courier_messages_console_sender
    ON courier_messages (sender_id, id);
CREATE INDEX courier_messages_console_receiver
    ON courier_messages (receiver_id, id)
    WHERE receiver_id IS NOT NULL;

-- Messages with the names of their queue, sender and receiver (NULL when the
-- receiver is not a registered client), and a dead letter's history.
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

-- Deletes one message; returns the queue it was in. NO_MESSAGE (CQ004) when it is
-- gone, e.g. popped a moment earlier: every message leaves exactly once.
CREATE FUNCTION courier_delete_message_v1(
    p_message_id bigint, OUT queue_id bigint, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    DELETE FROM courier_messages m WHERE m.id = p_message_id
    RETURNING m.queue_id INTO queue_id;
    IF NOT FOUND THEN
        PERFORM courier_fail_v1(4, format('message %s does not exist', p_message_id));
    END IF;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- == Quotas and capped counts (migration 0009) =======================================
-- A client may create only so many queues, and listings count each queue's messages
-- up to a cap instead of scanning a queue of any size.

CREATE INDEX courier_queues_created_by ON courier_queues (created_by)
    WHERE created_by IS NOT NULL;

-- The messages of a queue, counted up to p_cap: the work is bounded whatever the
-- queue holds (held messages are not counted, as before). A one-row table, because
-- a table function of one SELECT is inlined into the query that calls it: counting
-- every queue's messages is then one plan with an index probe per queue, not one
-- function call per queue (migration 0025). Inlining needs it to stay one SELECT in
-- LANGUAGE sql, STABLE (not VOLATILE) and not STRICT; a test in test_db_indexes.py
-- fails when the lists read the messages in a statement per queue.
CREATE FUNCTION courier_counted_messages_v1(p_queue_id bigint, p_reader_id bigint, p_cap integer)
RETURNS TABLE (n bigint)
LANGUAGE sql STABLE AS $$
    SELECT count(*) FROM (
        SELECT 1 FROM courier_messages m
        WHERE m.queue_id = p_queue_id
          AND (p_reader_id IS NULL OR m.audience IN (0, p_reader_id))
        LIMIT p_cap
    ) s
$$;

-- The same count as a value, for one queue (courier_get_queue_v2).
CREATE FUNCTION courier_count_messages_v1(p_queue_id bigint, p_reader_id bigint, p_cap integer)
RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT c.n FROM courier_counted_messages_v1(p_queue_id, p_reader_id, p_cap) c
$$;

-- Creates a queue for p_creator (NULL: the console's admin, who has no quota). A
-- client that already created p_max_queues queues gets QUOTA_EXCEEDED (18). The
-- creator's row is locked first (NO KEY UPDATE: its sends' key-share locks do not
-- wait), so two concurrent creates of one client cannot both pass the count.
CREATE FUNCTION courier_create_queue_v2(
    p_name text, p_creator bigint, p_max_queues integer,
    OUT id bigint, OUT name text, OUT message_count bigint, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
    v_created bigint;
BEGIN
    PERFORM courier_check_name_v1(p_name, 'queue');
    IF p_creator IS NOT NULL AND p_max_queues IS NOT NULL THEN
        PERFORM 1 FROM courier_clients c WHERE c.id = p_creator FOR NO KEY UPDATE;
        SELECT count(*) INTO v_created FROM (
            SELECT 1 FROM courier_queues q WHERE q.created_by = p_creator LIMIT p_max_queues
        ) s;
        IF v_created >= p_max_queues THEN
            PERFORM courier_fail_v1(18, format(
                'this client has created %s queues, the most one client may: delete one first',
                v_created));
        END IF;
    END IF;
    -- ON CONFLICT waits for a concurrent insert of the same name, so of two
    -- concurrent creates exactly one succeeds.
    INSERT INTO courier_queues (name, created_by) VALUES (p_name, p_creator)
    ON CONFLICT (name) DO NOTHING
    RETURNING courier_queues.id, courier_queues.name, 0 INTO id, name, message_count;
    IF NOT FOUND THEN
        PERFORM courier_fail_v1(2, format('queue %s exists', p_name));
    END IF;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

CREATE FUNCTION courier_get_queue_v2(
    p_id bigint, p_name text, p_count_cap integer,
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
    message_count := courier_count_messages_v1(courier_get_queue_v2.id, NULL, p_count_cap);
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- The lists that count each queue's messages run with sequential scans discouraged
-- (migration 0031): their plan is made for any queue at once, and when a few queues
-- hold most messages a scan of the whole table looked cheaper than each queue's
-- index walk, so every listed queue read the whole table.
CREATE FUNCTION courier_list_queues_v2(
    p_count_cap integer,
    OUT ids bigint[], OUT names text[], OUT message_counts bigint[], OUT exec_ns bigint)
LANGUAGE plpgsql
SET enable_seqscan = off
AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    SELECT coalesce(array_agg(q.id ORDER BY q.id), '{}'),
           coalesce(array_agg(q.name ORDER BY q.id), '{}'),
           coalesce(array_agg(c.n ORDER BY q.id), '{}')
    INTO ids, names, message_counts
    FROM courier_queues q
    CROSS JOIN LATERAL courier_counted_messages_v1(q.id, NULL, p_count_cap) c;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- The queues holding a message the reader may read, with how many (capped). The
-- reader's messages are read first, from every queue it may read in one index scan
-- of each partition, up to 1,000 of them; when there are fewer, every count is exact
-- and no other queue costs a probe (migration 0038). A reader with more is counted
-- queue by queue.
CREATE FUNCTION courier_queues_for_me_v2(
    p_reader_id bigint, p_count_cap integer,
    OUT ids bigint[], OUT names text[], OUT message_counts bigint[], OUT exec_ns bigint)
LANGUAGE plpgsql
SET enable_seqscan = off  -- see courier_list_queues_v2
-- A bitmap scan would read every readable message before the LIMIT.
SET enable_bitmapscan = off
AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
    v_readable_first CONSTANT integer := 1000;
    v_seen bigint;
BEGIN
    IF p_reader_id IS NOT NULL AND coalesce(p_count_cap, 1) > 0 THEN
        SELECT coalesce(array_agg(c.queue_id ORDER BY c.queue_id), '{}'),
               coalesce(array_agg(q.name ORDER BY c.queue_id), '{}'),
               coalesce(array_agg(least(c.n, p_count_cap) ORDER BY c.queue_id), '{}'),
               coalesce(sum(c.n), 0)
        INTO ids, names, message_counts, v_seen
        FROM (SELECT s.queue_id, count(*) AS n
              FROM (SELECT m.queue_id FROM courier_messages m
                    WHERE m.queue_id = ANY (ARRAY(
                              SELECT q.id FROM courier_queues q
                              WHERE q.readers IS NULL
                                 OR courier_allows_v1(p_reader_id, q.created_by, q.readers)))
                      AND m.audience = ANY (ARRAY[0, p_reader_id])
                    LIMIT v_readable_first) s
              GROUP BY s.queue_id) c
        JOIN courier_queues q ON q.id = c.queue_id;
        IF v_seen < v_readable_first THEN
            exec_ns := courier_elapsed_ns_v1(v_started);
            RETURN;
        END IF;
    END IF;
    SELECT coalesce(array_agg(q.id ORDER BY q.id), '{}'),
           coalesce(array_agg(q.name ORDER BY q.id), '{}'),
           coalesce(array_agg(c.n ORDER BY q.id), '{}')
    INTO ids, names, message_counts
    FROM courier_queues q
    CROSS JOIN LATERAL courier_counted_messages_v1(q.id, p_reader_id, p_count_cap) c
    WHERE (q.readers IS NULL OR courier_allows_v1(p_reader_id, q.created_by, q.readers))
      AND c.n > 0;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- == Queue limits (migration 0010) ===================================================
-- A queue may hold at most so many messages or bytes. Beyond its limit a send is
-- refused (QUOTA_EXCEEDED) or the queue drops its oldest visible messages.

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

-- == Batch API (migration 0011) =====================================================
-- One request carries many messages: a batch send all or none, a batch read, many
-- nacks with a result each, and courier_exchange_v4 carrying them beside the rest.

-- A plain batch as courier_send_batch_v2 checks and stores it (limits, room, and
-- the status of every message); the first failing message fails the batch.
CREATE FUNCTION courier_send_many_checked_v1(
    p_sender_id bigint, p_queue_ids bigint[], p_bodies bytea[], p_receivers bigint[],
    p_priorities integer[], p_contexts bigint[], p_max_body_bytes integer,
    p_started timestamptz)
RETURNS TABLE (message_ids bigint[], exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_count integer := cardinality(p_bodies);
    v_copy_requests integer[];
    v_copy_queues bigint[];
    v_row record;
BEGIN
    SELECT array_agg(k::integer ORDER BY k, q.ord), array_agg(q.id ORDER BY k, q.ord)
    INTO v_copy_requests, v_copy_queues
    FROM generate_series(1, v_count) k, unnest(p_queue_ids) WITH ORDINALITY q(id, ord);
    FOR v_row IN
        SELECT s.request, s.status, s.message, s.message_ids
        FROM courier_send_batch_v2(array_fill(p_sender_id, ARRAY[v_count]), p_bodies,
                                   p_receivers, p_priorities, p_contexts, v_copy_requests,
                                   v_copy_queues, p_max_body_bytes) s
        ORDER BY s.request
    LOOP
        IF v_row.status <> 0 THEN
            PERFORM courier_fail_v1(
                v_row.status, format('message %s of the batch: %s', v_row.request, v_row.message),
                CASE WHEN v_row.status = 12 THEN json_build_object(
                    'size', octet_length(p_bodies[v_row.request]),
                    'limit', p_max_body_bytes)::text ELSE '' END);
        END IF;
        message_ids := v_row.message_ids;
        exec_ns := courier_elapsed_ns_v1(p_started);
        RETURN NEXT;
    END LOOP;
END;
$$;

-- A batch of messages for the same queues, all or none; one row per message, in
-- order, with its ids (one per queue, in queue order). A plain batch (no delay,
-- expiry or dedup id) is checked once and stored in one statement; one that fails a
-- check, or names a queue with a limit, goes through courier_send_many_checked_v1. A
-- batch with any other message is stored one message at a time. The first bad
-- message fails the batch, naming its number.
CREATE FUNCTION courier_send_many_v1(
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

-- Up to p_count messages visible to the reader, in read order; none when the queue
-- has none (a missing queue fails). Plain pops by queue take the set-based walk;
-- pops by sender and leased pops take them one at a time (courier_read_v2).
CREATE FUNCTION courier_pop_many_v1(
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

-- Each delivery given back as courier_nack_v1 does, each with its own result: status
-- 0, or the status of why not (17: not held) and its message.
CREATE FUNCTION courier_nack_many_v1(
    p_holder_id bigint, p_delivery_ids bigint[], p_delay_ms integer, p_reason text)
RETURNS TABLE (request integer, status smallint, message text, exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    FOR v_i IN 1..coalesce(cardinality(p_delivery_ids), 0) LOOP
        request := v_i;
        BEGIN
            PERFORM courier_nack_v1(p_holder_id, p_delivery_ids[v_i], p_delay_ms, p_reason);
            status := 0;
            message := NULL;
        EXCEPTION WHEN OTHERS THEN
            IF SQLSTATE NOT LIKE 'CQ%' THEN
                RAISE;
            END IF;
            status := substr(SQLSTATE, 3)::smallint;
            message := SQLERRM;
        END;
        exec_ns := courier_elapsed_ns_v1(v_started);
        RETURN NEXT;
    END LOOP;
END;
$$;

-- A batch send and a batch read as courier_exchange_v4 takes them; request is the
-- caller's number.
CREATE TYPE courier_send_group_v1 AS (
    request integer, sender_id bigint, queue_ids bigint[], bodies bytea[],
    receivers bigint[], priorities integer[], contexts bigint[], delays integer[],
    ttls integer[], dedup_ids text[]);

CREATE TYPE courier_pop_group_v1 AS (
    request integer, reader_id bigint, queue_id bigint, sender_id bigint, read_order text,
    count integer, lease_ms integer, instance_id bigint);

-- courier_exchange_v3, with batch sends stored right after the other sends and batch
-- reads taken right after the other pops: acks, sends, option sends, batch sends,
-- pops and reads, batch reads. A batch answers with one row per message (ids for a
-- send, the message for a read), in order, all under its request number; a batch a
-- client got wrong answers with one row of its status alone, undone whole.
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
LANGUAGE plpgsql AS $$
DECLARE
    v_send courier_send_group_v1;
    v_pop courier_pop_group_v1;
BEGIN
    RETURN QUERY
    SELECT * FROM courier_exchange_v3(
        p_send_requests, p_senders, p_bodies, p_receivers, p_priorities, p_contexts,
        p_copy_sends, p_copy_queues, p_max_body_bytes,
        '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}',
        p_ack_requests, p_ack_holders, p_ack_deliveries, p_option_sends, p_dedup_window_ms);
    FOREACH v_send IN ARRAY coalesce(p_send_groups, '{}') LOOP
        BEGIN
            RETURN QUERY
            SELECT v_send.request, 0::smallint, NULL::text, s.message_ids, NULL::bigint,
                   NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::smallint,
                   NULL::timestamptz, NULL::bytea, NULL::integer, NULL::bigint,
                   NULL::bigint, NULL::text, s.exec_ns
            FROM courier_send_many_v1(v_send.sender_id, v_send.queue_ids, v_send.bodies,
                                      v_send.receivers, v_send.priorities, v_send.contexts,
                                      v_send.delays, v_send.ttls, v_send.dedup_ids,
                                      p_max_body_bytes, p_dedup_window_ms) s;
        EXCEPTION WHEN OTHERS THEN
            IF SQLSTATE NOT LIKE 'CQ%' THEN
                RAISE;
            END IF;
            RETURN QUERY
            SELECT v_send.request, substr(SQLSTATE, 3)::smallint, SQLERRM, NULL::bigint[],
                   NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,
                   NULL::smallint, NULL::timestamptz, NULL::bytea, NULL::integer,
                   NULL::bigint, NULL::bigint, NULL::text, 0::bigint;
        END;
    END LOOP;
    IF cardinality(p_pop_requests) > 0 OR cardinality(p_read_requests) > 0 THEN
        RETURN QUERY
        SELECT * FROM courier_exchange_v2(
            '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', p_max_body_bytes,
            p_pop_requests, p_pop_queues, p_pop_orders, p_pop_readers,
            p_read_requests, p_read_readers, p_read_queues, p_read_senders, p_read_orders,
            p_read_pops, p_read_leases, p_read_instances, '{}', '{}', '{}');
    END IF;
    FOREACH v_pop IN ARRAY coalesce(p_pop_groups, '{}') LOOP
        BEGIN
            RETURN QUERY
            SELECT v_pop.request, 0::smallint, NULL::text, NULL::bigint[], p.id, p.queue_id,
                   p.sender_id, p.receiver_id, p.context, p.priority, p.created_at, p.body,
                   p.deliveries, p.delivery_id, p.dead_from, p.failure, p.exec_ns
            FROM courier_pop_many_v1(v_pop.reader_id, v_pop.queue_id, v_pop.sender_id,
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
                   NULL::bigint, NULL::bigint, NULL::text, 0::bigint;
        END;
    END LOOP;
END;
$$;

-- == Auth (migration 0013) ===========================================================

CREATE FUNCTION courier_check_verifier_v1(
    p_salt bytea, p_iterations integer, p_stored_key bytea, p_server_key bytea)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF length(p_salt) NOT BETWEEN 16 AND 64 OR p_iterations < 4096
       OR length(p_stored_key) <> 32 OR length(p_server_key) <> 32 THEN
        PERFORM courier_fail_v1(10, 'a secret''s verifier needs a 16 to 64 byte salt, at'
            ' least 4096 iterations and 32-byte keys');
    END IF;
END;
$$;

-- Like v1, with a mode that may be admin (the middleware lets only an admin create
-- one) and the verifier of the client's secret (NULL: none).
CREATE FUNCTION courier_register_client_v2(
    p_name text, p_mode text, p_salt bytea, p_iterations integer, p_stored_key bytea,
    p_server_key bytea,
    OUT id bigint, OUT name text, OUT mode text, OUT online boolean, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    PERFORM courier_check_name_v1(p_name, 'client');
    IF p_mode IS NULL OR p_mode NOT IN ('read_write', 'read_only', 'admin') THEN
        PERFORM courier_fail_v1(10, 'client mode must be read_write, read_only or admin');
    END IF;
    IF p_stored_key IS NOT NULL THEN
        PERFORM courier_check_verifier_v1(p_salt, p_iterations, p_stored_key, p_server_key);
    END IF;
    INSERT INTO courier_clients (
        name, mode, admin, auth_salt, auth_iterations, auth_stored_key, auth_server_key)
    VALUES (p_name, CASE p_mode WHEN 'admin' THEN 'read_write' ELSE p_mode END,
            p_mode = 'admin', p_salt, p_iterations, p_stored_key, p_server_key)
    ON CONFLICT (name) DO NOTHING
    RETURNING courier_clients.id, courier_clients.name, p_mode, false
    INTO id, name, mode, online;
    IF NOT FOUND THEN
        PERFORM courier_fail_v1(7, format('a client named %s exists', p_name));
    END IF;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- The verifier to check a login against, by id or by name (p_id NULL). Never raises:
-- id is NULL when the client does not exist, is disabled or has no secret, so the
-- middleware answers each of those alike.
CREATE FUNCTION courier_auth_verifier_v1(
    p_id bigint, p_name text,
    OUT id bigint, OUT salt bytea, OUT iterations integer, OUT stored_key bytea,
    OUT server_key bytea, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    SELECT c.id, c.auth_salt, c.auth_iterations, c.auth_stored_key, c.auth_server_key
    INTO id, salt, iterations, stored_key, server_key
    FROM courier_clients c
    WHERE (c.id = p_id OR (p_id IS NULL AND c.name = p_name))
      AND NOT c.disabled AND c.auth_stored_key IS NOT NULL;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- Opens the session of a client whose proof the middleware checked (by id); a client
-- disabled meanwhile is refused with the same NOT_AUTHORISED as a wrong secret.
CREATE FUNCTION courier_login_v2(
    p_id bigint, p_instance_id bigint,
    OUT id bigint, OUT name text, OUT mode text, OUT online boolean, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    PERFORM 1 FROM courier_clients c WHERE c.id = p_id AND NOT c.disabled FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        PERFORM courier_fail_v1(13, 'login failed');
    END IF;
    SELECT l.id, l.name, CASE WHEN c.admin THEN 'admin' ELSE l.mode END, l.online
    INTO id, name, mode, online
    FROM courier_login_v1(p_id, NULL, p_instance_id) l JOIN courier_clients c ON c.id = l.id;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

CREATE FUNCTION courier_is_admin_v1(p_client_id bigint)
RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM courier_clients c
                   WHERE c.id = p_client_id AND c.admin AND NOT c.disabled)
$$;

-- A client sets its own secret; an admin may set anyone's (a reset).
CREATE FUNCTION courier_set_secret_v1(
    p_actor_id bigint, p_client_id bigint, p_salt bytea, p_iterations integer,
    p_stored_key bytea, p_server_key bytea, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    IF p_actor_id IS DISTINCT FROM p_client_id AND NOT courier_is_admin_v1(p_actor_id) THEN
        PERFORM courier_fail_v1(13, 'only an admin may set another client''s secret');
    END IF;
    PERFORM courier_check_verifier_v1(p_salt, p_iterations, p_stored_key, p_server_key);
    UPDATE courier_clients c
    SET auth_salt = p_salt, auth_iterations = p_iterations,
        auth_stored_key = p_stored_key, auth_server_key = p_server_key
    WHERE c.id = p_client_id;
    IF NOT FOUND THEN
        PERFORM courier_fail_v1(6, format('no client %s', p_client_id));
    END IF;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- An admin disables (or enables again) a client. Disabling ends its session and
-- announces it on channel courier_clients (payload: the client id), so the
-- middleware holding the session closes that connection at once.
CREATE FUNCTION courier_set_client_enabled_v1(
    p_actor_id bigint, p_client_id bigint, p_enabled boolean, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    IF NOT courier_is_admin_v1(p_actor_id) THEN
        PERFORM courier_fail_v1(13, 'only an admin may disable or enable a client');
    END IF;
    UPDATE courier_clients c
    SET disabled = NOT p_enabled,
        session_instance_id = CASE WHEN p_enabled THEN c.session_instance_id END
    WHERE c.id = p_client_id;
    IF NOT FOUND THEN
        PERFORM courier_fail_v1(6, format('no client %s', p_client_id));
    END IF;
    IF NOT p_enabled THEN
        PERFORM pg_notify('courier_clients', p_client_id::text);
    END IF;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- QUEUE_NOT_FOUND, or NOT_AUTHORISED unless the actor owns the queue (created it) or
-- is an admin. A queue whose creator is gone (or from before owners) is the admins'.
CREATE FUNCTION courier_check_owner_v1(p_actor_id bigint, p_queue_id bigint, p_action text)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_owner bigint;
BEGIN
    SELECT q.created_by INTO v_owner FROM courier_queues q WHERE q.id = p_queue_id;
    IF NOT FOUND THEN
        PERFORM courier_fail_v1(1, format('queue %s does not exist', p_queue_id));
    END IF;
    IF v_owner IS DISTINCT FROM p_actor_id AND NOT courier_is_admin_v1(p_actor_id) THEN
        PERFORM courier_fail_v1(13, format(
            'only the owner of queue %s or an admin may %s it', p_queue_id, p_action));
    END IF;
END;
$$;

CREATE FUNCTION courier_delete_queue_v2(
    p_actor_id bigint, p_queue_id bigint, p_if_empty boolean, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    PERFORM courier_check_owner_v1(p_actor_id, p_queue_id, 'delete');
    PERFORM courier_delete_queue_v1(p_queue_id, p_if_empty);
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

CREATE FUNCTION courier_configure_queue_v3(
    p_actor_id bigint, p_queue_id bigint, p_max_deliveries integer,
    p_dead_letter_queue_id bigint, p_dead_letter_expired boolean, p_max_messages integer,
    p_max_bytes bigint, p_overflow text,
    OUT queue_id bigint, OUT max_deliveries integer, OUT dead_letter_queue_id bigint,
    OUT dead_letter_expired boolean, OUT max_messages integer, OUT max_bytes bigint,
    OUT overflow text, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    PERFORM courier_check_owner_v1(p_actor_id, p_queue_id, 'configure');
    SELECT c.queue_id, c.max_deliveries, c.dead_letter_queue_id, c.dead_letter_expired,
           c.max_messages, c.max_bytes, c.overflow
    INTO queue_id, max_deliveries, dead_letter_queue_id, dead_letter_expired,
         max_messages, max_bytes, overflow
    FROM courier_configure_queue_v2(p_queue_id, p_max_deliveries, p_dead_letter_queue_id,
        p_dead_letter_expired, p_max_messages, p_max_bytes, p_overflow) c;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- == Properties (migration 0014) ===================================================
-- A message may carry properties: text keys to text values, stored as a jsonb object
-- (NULL: none) in courier_messages and courier_held_messages, moved with the message
-- by every function that moves one (courier_settle_v1, courier_lease_v1,
-- courier_expire_v1, courier_redrive_v1, courier_restore_v2). The functions below
-- take and return them; the versions before them go on working without.

-- courier_send_v2 with p_properties (a jsonb object, or NULL for none).
CREATE FUNCTION courier_send_v3(
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

-- The first message visible to the reader, in read order, read whole by the statement
-- that finds it (migration 0039): NULL when there is none. A peek needs no row lock,
-- so one statement answers it from one snapshot.
CREATE FUNCTION courier_peek_v1(
    p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text)
RETURNS courier_messages
LANGUAGE plpgsql STABLE
-- A custom plan per call would cost more than the statement (migration 0035).
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_first courier_messages;
    v_hidden bigint[];  -- queues the reader may not read (a read by sender alone)
BEGIN
    IF p_sender_id IS NULL AND p_order = 'time' THEN
        SELECT c.* INTO v_first
        FROM (VALUES (0), (p_reader_id)) a(audience) CROSS JOIN LATERAL (
            SELECT m.* FROM courier_messages m
            WHERE m.queue_id = p_queue_id AND m.audience = a.audience
            ORDER BY m.created_at, m.id LIMIT 1) c
        ORDER BY c.created_at, c.id LIMIT 1;
    ELSIF p_sender_id IS NULL THEN
        SELECT c.* INTO v_first
        FROM (VALUES (0), (p_reader_id)) a(audience) CROSS JOIN LATERAL (
            SELECT m.* FROM courier_messages m
            WHERE m.queue_id = p_queue_id AND m.audience = a.audience
            ORDER BY m.priority DESC, m.created_at, m.id LIMIT 1) c
        ORDER BY c.priority DESC, c.created_at, c.id LIMIT 1;
    ELSIF p_queue_id IS NOT NULL AND p_order = 'time' THEN
        SELECT c.* INTO v_first
        FROM (VALUES (0), (p_reader_id)) a(audience) CROSS JOIN LATERAL (
            SELECT m.* FROM courier_messages m
            WHERE m.queue_id = p_queue_id AND m.sender_id = p_sender_id
              AND m.audience = a.audience
            ORDER BY m.created_at, m.id LIMIT 1) c
        ORDER BY c.created_at, c.id LIMIT 1;
    ELSIF p_queue_id IS NOT NULL THEN
        SELECT c.* INTO v_first
        FROM (VALUES (0), (p_reader_id)) a(audience) CROSS JOIN LATERAL (
            SELECT m.* FROM courier_messages m
            WHERE m.queue_id = p_queue_id AND m.sender_id = p_sender_id
              AND m.audience = a.audience
            ORDER BY m.priority DESC, m.created_at, m.id LIMIT 1) c
        ORDER BY c.priority DESC, c.created_at, c.id LIMIT 1;
    ELSE
        v_hidden := courier_unreadable_v1(p_reader_id);
        IF p_order = 'time' THEN
            SELECT c.* INTO v_first
            FROM (VALUES (0), (p_reader_id)) a(audience) CROSS JOIN LATERAL (
                SELECT m.* FROM courier_messages m
                WHERE m.sender_id = p_sender_id AND m.audience = a.audience
                  AND m.queue_id <> ALL (v_hidden)
                ORDER BY m.created_at, m.id LIMIT 1) c
            ORDER BY c.created_at, c.id LIMIT 1;
        ELSE
            SELECT c.* INTO v_first
            FROM (VALUES (0), (p_reader_id)) a(audience) CROSS JOIN LATERAL (
                SELECT m.* FROM courier_messages m
                WHERE m.sender_id = p_sender_id AND m.audience = a.audience
                  AND m.queue_id <> ALL (v_hidden)
                ORDER BY m.priority DESC, m.created_at, m.id LIMIT 1) c
            ORDER BY c.priority DESC, c.created_at, c.id LIMIT 1;
        END IF;
    END IF;
    RETURN v_first;
END;
$$;

-- courier_read_v2, answering with the message's properties too. A peek reads its
-- message in one statement (courier_peek_v1, migration 0039); a pop takes its row lock
-- first (courier_take_one_v1, or courier_pick_v1 for a pop by sender).
CREATE FUNCTION courier_read_v3(
    p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text,
    p_pop boolean, p_lease_ms integer, p_instance_id bigint,
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
    IF NOT coalesce(p_pop, false) THEN
        v_taken := courier_peek_v1(p_reader_id, p_queue_id, p_sender_id, p_order);
    ELSE
        IF p_sender_id IS NULL THEN
            v_id := courier_take_one_v1(p_reader_id, p_queue_id, p_order);
        ELSE
            v_id := courier_pick_v1(p_reader_id, p_queue_id, p_sender_id, p_order, true);
        END IF;
        IF v_id IS NOT NULL THEN
            DELETE FROM courier_messages m WHERE m.id = v_id RETURNING m.* INTO v_taken;
            IF NOT FOUND THEN  -- cannot happen while the pick holds the row lock
                PERFORM courier_fail_v1(16, format('message %s vanished while popped', v_id));
            END IF;
        END IF;
    END IF;
    IF v_taken.id IS NULL THEN
        -- The queue was found above (a delete since is read as after this read).
        status := CASE WHEN p_queue_id IS NULL THEN 4 ELSE 5 END;
        exec_ns := courier_elapsed_ns_v1(v_started);
        RETURN;
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
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- courier_pop_response_v2, answering with the message's properties too.
CREATE FUNCTION courier_pop_response_v3(
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

-- courier_restore_v1 with the popped message's properties.
CREATE FUNCTION courier_restore_v2(
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

-- courier_pop_batch_v2, answering with each message's properties too.
CREATE FUNCTION courier_pop_batch_v3(p_queue_id bigint, p_order text, p_readers bigint[])
RETURNS TABLE (request integer, status smallint, message text, id bigint, queue_id bigint,
               sender_id bigint, receiver_id bigint, context bigint, priority smallint,
               created_at timestamptz, body bytea, deliveries integer, delivery_id bigint,
               dead_from bigint, failure text, properties jsonb, exec_ns bigint)
LANGUAGE plpgsql
-- Plan once: custom plans of these statements cost more than running them.
SET plan_cache_mode = force_generic_plan
-- Walk indexes whatever the statistics say (migration 0032): a plan made for any
-- queue at once took a queue to hold as many messages as the busiest one.
SET enable_seqscan = off
AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
    v_with_own bigint[];   -- readers holding messages of their own here
    v_shared integer[];    -- requests served by the shared walk, in order
    v_next integer;        -- the next of them to answer
    v_taken integer;       -- how many the shared walk answered
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
    -- One probe says whether the queue holds any message for one receiver; only then
    -- is each reader asked whether it holds one of its own (migration 0027).
    IF EXISTS (SELECT FROM courier_messages m WHERE m.queue_id = p_queue_id AND m.audience > 0)
    THEN
        -- A probe per reader (LIMIT keeps it from becoming a join over the whole queue).
        SELECT array_agg(DISTINCT r.reader) INTO v_with_own FROM unnest(p_readers) r(reader)
        WHERE (SELECT true FROM courier_messages m
               WHERE m.queue_id = p_queue_id AND m.audience = r.reader LIMIT 1);
    END IF;
    SELECT array_agg(r.n ORDER BY r.n) INTO v_shared
    FROM unnest(p_readers) WITH ORDINALITY r(reader, n)
    WHERE NOT r.reader = ANY (coalesce(v_with_own, '{}'));

    -- The shared walk, answered in one statement: the requests in order, each with
    -- the message its place in read order gives it (migration 0032).
    IF p_order = 'priority' THEN
        RETURN QUERY
        WITH picked AS (
            SELECT m.id FROM courier_messages m
            WHERE m.queue_id = p_queue_id AND m.audience = 0
            ORDER BY m.priority DESC, m.created_at, m.id
            LIMIT coalesce(cardinality(v_shared), 0)
            FOR UPDATE SKIP LOCKED
        ), taken AS (
            DELETE FROM courier_messages m WHERE m.id = ANY (ARRAY(SELECT p.id FROM picked p))
            RETURNING m.*
        )
        SELECT v_shared[t.n], 0::smallint, NULL::text, t.id, t.queue_id, t.sender_id,
               t.receiver_id, t.context, t.priority, t.created_at, t.body, t.deliveries,
               NULL::bigint, t.dead_from, t.failure, t.properties,
               courier_elapsed_ns_v1(v_started)
        FROM (SELECT k.*, row_number() OVER (ORDER BY k.priority DESC, k.created_at, k.id)
                          ::integer AS n
              FROM taken k) t
        ORDER BY t.n;
    ELSE
        RETURN QUERY
        WITH picked AS (
            SELECT m.id FROM courier_messages m
            WHERE m.queue_id = p_queue_id AND m.audience = 0
            ORDER BY m.created_at, m.id
            LIMIT coalesce(cardinality(v_shared), 0)
            FOR UPDATE SKIP LOCKED
        ), taken AS (
            DELETE FROM courier_messages m WHERE m.id = ANY (ARRAY(SELECT p.id FROM picked p))
            RETURNING m.*
        )
        SELECT v_shared[t.n], 0::smallint, NULL::text, t.id, t.queue_id, t.sender_id,
               t.receiver_id, t.context, t.priority, t.created_at, t.body, t.deliveries,
               NULL::bigint, t.dead_from, t.failure, t.properties,
               courier_elapsed_ns_v1(v_started)
        FROM (SELECT k.*, row_number() OVER (ORDER BY k.created_at, k.id)::integer AS n
              FROM taken k) t
        ORDER BY t.n;
    END IF;
    GET DIAGNOSTICS v_taken = ROW_COUNT;
    v_next := v_taken + 1;

    FOR v_row IN SELECT r.reader, r.n::integer AS n
                 FROM unnest(p_readers) WITH ORDINALITY r(reader, n)
                 WHERE r.reader = ANY (v_with_own) ORDER BY r.n LOOP
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

-- courier_pop_many_v1, answering with each message's properties too.
CREATE FUNCTION courier_pop_many_v2(
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

-- A batch stored one message at a time (courier_send_v3), all or none: the first
-- bad message fails the batch, naming its number.
CREATE FUNCTION courier_send_each_v1(
    p_sender_id bigint, p_queue_ids bigint[], p_bodies bytea[], p_receivers bigint[],
    p_priorities integer[], p_contexts bigint[], p_delays integer[], p_ttls integer[],
    p_dedup_ids text[], p_properties jsonb[], p_max_body_bytes integer,
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
            FROM courier_send_v3(p_sender_id, p_queue_ids, p_bodies[v_i], p_receivers[v_i],
                                 p_priorities[v_i], p_contexts[v_i], p_max_body_bytes,
                                 coalesce(p_delays[v_i], 0), p_ttls[v_i], p_dedup_ids[v_i],
                                 p_dedup_window_ms, p_properties[v_i]) s;
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

-- courier_send_many_v1 with p_properties, one per message (NULL: none). A plain
-- batch with properties is still stored in one statement; one with options, or one
-- that needs the general path, goes through courier_send_each_v1.
CREATE FUNCTION courier_send_many_v2(
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

-- One send with options or properties, as courier_send_v3 takes it; request is the
-- caller's number.
CREATE TYPE courier_option_send_v2 AS (
    request integer, sender_id bigint, queue_ids bigint[], body bytea, receiver_id bigint,
    priority integer, context bigint, delay_ms integer, ttl_ms integer, dedup_id text,
    properties jsonb);

-- A batch send as courier_send_many_v2 takes it.
CREATE TYPE courier_send_group_v2 AS (
    request integer, sender_id bigint, queue_ids bigint[], bodies bytea[],
    receivers bigint[], priorities integer[], contexts bigint[], delays integer[],
    ttls integer[], dedup_ids text[], properties jsonb[]);

-- courier_exchange_v4 with properties: every message read comes with its properties,
-- and sends with options or properties go one by one (courier_send_v3), batch sends
-- through courier_send_many_v2. The same order: acks and plain sends (set-based, as
-- in courier_exchange_v2), option sends, batch sends, pops by queue, other reads,
-- batch reads. A caller with only acks and plain sends may keep calling
-- courier_exchange_v2, which answers them alike.
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
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
    v_pops integer := coalesce(cardinality(p_pop_requests), 0);
    v_first integer := 1;  -- where the current group of pops starts
    v_send courier_option_send_v2;
    v_group courier_send_group_v2;
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
        FROM courier_send_batch_v2(p_senders, p_bodies, p_receivers, p_priorities, p_contexts,
                                   p_copy_sends, p_copy_queues, p_max_body_bytes) s;
    END IF;
    FOREACH v_send IN ARRAY coalesce(p_option_sends, '{}') LOOP
        BEGIN
            RETURN QUERY
            SELECT v_send.request, 0::smallint, NULL::text, s.message_ids, NULL::bigint,
                   NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::smallint,
                   NULL::timestamptz, NULL::bytea, NULL::integer, NULL::bigint,
                   NULL::bigint, NULL::text, NULL::jsonb, s.exec_ns
            FROM courier_send_v3(v_send.sender_id, v_send.queue_ids, v_send.body,
                                 v_send.receiver_id, v_send.priority, v_send.context,
                                 p_max_body_bytes, v_send.delay_ms, v_send.ttl_ms,
                                 v_send.dedup_id, p_dedup_window_ms, v_send.properties) s;
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
            FROM courier_send_many_v2(v_group.sender_id, v_group.queue_ids, v_group.bodies,
                                      v_group.receivers, v_group.priorities, v_group.contexts,
                                      v_group.delays, v_group.ttls, v_group.dedup_ids,
                                      v_group.properties, p_max_body_bytes,
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
-- its subscriber logged out) takes its queue and the queue's messages with it. Row
-- by row since migration 0029: a statement trigger also ran, empty, on every delete
-- of a queue.
CREATE FUNCTION courier_drop_subscription_queues_v1()
RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- When the queue itself was deleted first, there is nothing left to delete.
    DELETE FROM courier_queues q WHERE q.id = OLD.queue_id;
    RETURN NULL;
END;
$$;

CREATE TRIGGER courier_subscriptions_gone
    AFTER DELETE ON courier_subscriptions
    FOR EACH ROW EXECUTE FUNCTION courier_drop_subscription_queues_v1();

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
LANGUAGE plpgsql
SET enable_seqscan = off  -- see courier_list_queues_v2
AS $$
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
    SELECT t.id, t.name, s.queue_id, q.name, s.name, s.durable, s.subscriber_id, c.n,
           courier_elapsed_ns_v1(v_started)
    FROM courier_topics t
    LEFT JOIN courier_subscriptions s ON s.topic_id = t.id
    LEFT JOIN courier_queues q ON q.id = s.queue_id
    LEFT JOIN LATERAL courier_counted_messages_v1(s.queue_id, NULL, p_count_cap) c
        ON s.queue_id IS NOT NULL
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

-- The functions listed above were changed in place by this migration (their bodies
-- above already check the lists).

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

-- courier_send_batch_v2 with p_persistent, one per request: courier_send_batch_v3 until
-- migration 0026 gave that name to a leaner path, which leaves it the batches with
-- something to check (below).
CREATE FUNCTION courier_send_batch_checked_v1(
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

-- == A plain batch of sends in two statements (migration 0026) =======================
-- courier_send_batch_v3 ran one statement of twelve common table expressions for
-- every batch: the checks of each request, the room left in limited queues, the
-- send lists, the insert. PostgreSQL sets up every node of such a plan on each run
-- whether or not it has work, which cost about twice the insert itself. The batch
-- is now looked at once (its queues locked, its requests checked), and a batch with
-- nothing to refuse, no limited queue and no send list is stored by a bare insert.
-- Any other batch takes the former statement, renamed courier_send_batch_checked_v1,
-- so every answer stays as it was. Each sender's mode is looked up by its key
-- (migration 0030): a join let the planner read the whole client table per batch.
CREATE FUNCTION courier_send_batch_v3(
    p_senders bigint[], p_bodies bytea[], p_receivers bigint[], p_priorities integer[],
    p_contexts bigint[], p_persistent boolean[], p_copy_requests integer[], p_copy_queues bigint[],
    p_max_body_bytes integer)
RETURNS TABLE (request integer, status smallint, message text, message_ids bigint[],
               exec_ns bigint)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
    v_queues integer;     -- distinct queues named, and of them the ones that exist
    v_found integer;
    v_special boolean;    -- some queue named has a limit or a send list
    v_plain boolean;      -- every request passes the checks on its own fields
    v_well_formed boolean;  -- every request has copies, each queue once; none of another
BEGIN
    -- One look at the batch: it locks its queues (key share keeps them from being
    -- deleted before the insert) and says whether the plain path may store it.
    SELECT q.found, q.special, r.plain, c.queues, c.well_formed
    INTO v_found, v_special, v_plain, v_queues, v_well_formed
    FROM (SELECT count(*) AS found,
                 bool_or(l.max_messages IS NOT NULL OR l.max_bytes IS NOT NULL
                         OR l.senders IS NOT NULL) AS special
          FROM (SELECT k.max_messages, k.max_bytes, k.senders FROM courier_queues k
                WHERE k.id = ANY (p_copy_queues) FOR KEY SHARE) l) q,
         (SELECT bool_and(coalesce(octet_length(m.body) <= p_max_body_bytes
                                   AND m.priority BETWEEN 1 AND 10
                                   AND (m.receiver IS NULL OR m.receiver > 0)
                                   AND (SELECT s.mode FROM courier_clients s
                                        WHERE s.id = m.sender) = 'read_write',
                                   false)) AS plain
          FROM unnest(p_senders, p_bodies, p_receivers, p_priorities)
               AS m(sender, body, receiver, priority)) r,
         (SELECT count(DISTINCT k.queue_id) AS queues,
                 count(DISTINCT (k.request, k.queue_id)) = count(*)
                 AND count(DISTINCT k.request) = cardinality(p_senders)
                 AND min(k.request) >= 1 AND max(k.request) <= cardinality(p_senders)
                 AS well_formed
          FROM unnest(p_copy_requests, p_copy_queues) k(request, queue_id)) c;
    IF v_special OR NOT coalesce(v_plain, false) OR v_found < v_queues
       OR NOT coalesce(v_well_formed, false) THEN
        -- Anything else (a limit, a send list, a request to refuse) takes the checked
        -- path, which answers each request as before.
        RETURN QUERY SELECT * FROM courier_send_batch_checked_v1(p_senders, p_bodies,
            p_receivers, p_priorities, p_contexts, p_persistent, p_copy_requests,
            p_copy_queues, p_max_body_bytes);
        RETURN;
    END IF;
    RETURN QUERY
    WITH valid AS (
        SELECT c.ord, c.request, c.queue_id, nextval('courier_messages_id_seq') AS id
        FROM unnest(p_copy_requests, p_copy_queues) WITH ORDINALITY AS c(request, queue_id, ord)
        ORDER BY c.ord
    ), stored AS (
        INSERT INTO courier_messages
            (id, queue_id, sender_id, receiver_id, context, priority, body, persistent)
        OVERRIDING SYSTEM VALUE
        SELECT v.id, v.queue_id, p_senders[v.request], p_receivers[v.request],
               p_contexts[v.request], p_priorities[v.request], p_bodies[v.request],
               coalesce(p_persistent[v.request], true)
        FROM valid v ORDER BY v.ord
    )
    SELECT v.request::integer, 0::smallint, NULL::text, array_agg(v.id ORDER BY v.ord),
           courier_elapsed_ns_v1(v_started)
    FROM valid v GROUP BY v.request ORDER BY v.request;
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

-- courier_exchange_v6 with queue requests (migration 0033): the creates first, each
-- in a subtransaction; then all of v6; then the listings of queues for a reader; the
-- deletes last, each in a subtransaction. Creates and deletes run with a lock timeout
-- of a millisecond, so that none holds up the batch: one that would wait for a lock
-- answers status -1 ("left out"), as does the delete of a queue holding more than 64
-- messages, and the middleware runs it alone after the batch commits.
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
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan  -- see courier_delete_queue_v1 (migration 0035)
AS $$
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

-- == Selectors (migration 0019) =====================================================
-- A read may carry a selector: a jsonpath predicate over the message's properties,
-- built by the middleware (courier.selectors) with every literal a variable of
-- p_vars and every property name a quoted, escaped key, and passed as a bound
-- parameter. A message is taken only when jsonb_path_match says true (silent: an
-- error or unknown is not true). A message without properties is matched as {}.
-- The new read functions take the selector beside the old ones; a NULL selector
-- runs the old function unchanged, with its plans.

-- Up to p_count messages visible to p_reader_id that the selector matches, in read
-- order, from one queue (p_queue_id) or, with only a sender, from every queue the
-- reader may read; locked (FOR UPDATE SKIP LOCKED) when p_lock. One statement walks
-- both audiences (for anyone, and the reader's own) of the queue's index, filters
-- as it goes and keeps the first p_count in read order; the queue and the sender-only
-- reads are separate statements, so a generic plan of either still uses its index.
CREATE FUNCTION courier_select_ids_v1(
    p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text,
    p_count integer, p_lock boolean, p_selector jsonpath, p_vars jsonb)
RETURNS bigint[]
LANGUAGE plpgsql AS $$
DECLARE
    v_hidden bigint[];  -- queues the reader may not read
BEGIN
    IF p_queue_id IS NOT NULL AND p_lock THEN
        RETURN ARRAY(
            SELECT m.id FROM courier_messages m
            WHERE m.queue_id = p_queue_id AND m.audience IN (0, p_reader_id)
              AND (p_sender_id IS NULL OR m.sender_id = p_sender_id)
              AND jsonb_path_match(coalesce(m.properties, '{}'), p_selector, p_vars, true)
            ORDER BY (CASE WHEN p_order = 'priority' THEN m.priority END) DESC NULLS LAST,
                     m.created_at, m.id
            LIMIT p_count FOR UPDATE SKIP LOCKED);
    ELSIF p_queue_id IS NOT NULL THEN
        RETURN ARRAY(
            SELECT m.id FROM courier_messages m
            WHERE m.queue_id = p_queue_id AND m.audience IN (0, p_reader_id)
              AND (p_sender_id IS NULL OR m.sender_id = p_sender_id)
              AND jsonb_path_match(coalesce(m.properties, '{}'), p_selector, p_vars, true)
            ORDER BY (CASE WHEN p_order = 'priority' THEN m.priority END) DESC NULLS LAST,
                     m.created_at, m.id
            LIMIT p_count);
    END IF;
    v_hidden := courier_unreadable_v1(p_reader_id);
    IF p_lock THEN
        RETURN ARRAY(
            SELECT m.id FROM courier_messages m
            WHERE m.sender_id = p_sender_id AND m.audience IN (0, p_reader_id)
              AND m.queue_id <> ALL (v_hidden)
              AND jsonb_path_match(coalesce(m.properties, '{}'), p_selector, p_vars, true)
            ORDER BY (CASE WHEN p_order = 'priority' THEN m.priority END) DESC NULLS LAST,
                     m.created_at, m.id
            LIMIT p_count FOR UPDATE SKIP LOCKED);
    END IF;
    RETURN ARRAY(
        SELECT m.id FROM courier_messages m
        WHERE m.sender_id = p_sender_id AND m.audience IN (0, p_reader_id)
          AND m.queue_id <> ALL (v_hidden)
          AND jsonb_path_match(coalesce(m.properties, '{}'), p_selector, p_vars, true)
        ORDER BY (CASE WHEN p_order = 'priority' THEN m.priority END) DESC NULLS LAST,
                 m.created_at, m.id
        LIMIT p_count);
END;
$$;

-- The checks every read makes before it looks: a known order, a lease only on a pop,
-- the queue exists, and the reader is on its read list.
CREATE FUNCTION courier_check_read_v1(
    p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text, p_pop boolean,
    p_lease_ms integer)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_readers bigint[];
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
END;
$$;

-- Pops up to p_count visible messages the selector matches, in read order (after
-- courier_check_read_v1), each leased when p_lease_ms > 0. Both selective pops take
-- their messages here.
CREATE FUNCTION courier_take_selected_v1(
    p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text,
    p_count integer, p_lease_ms integer, p_instance_id bigint, p_selector jsonpath,
    p_vars jsonb)
RETURNS TABLE (id bigint, queue_id bigint, sender_id bigint, receiver_id bigint,
               context bigint, priority smallint, created_at timestamptz, body bytea,
               deliveries integer, delivery_id bigint, dead_from bigint, failure text,
               properties jsonb)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_id bigint;
    v_taken courier_messages%ROWTYPE;
    v_lease record;
BEGIN
    FOREACH v_id IN ARRAY courier_select_ids_v1(
            p_reader_id, p_queue_id, p_sender_id, p_order, p_count, true, p_selector, p_vars)
    LOOP
        DELETE FROM courier_messages m WHERE m.id = v_id RETURNING m.* INTO v_taken;
        SELECT NULL::bigint AS delivery_id, v_taken.deliveries AS deliveries INTO v_lease;
        IF p_lease_ms > 0 THEN
            SELECT * INTO v_lease
            FROM courier_lease_v1(v_taken, p_lease_ms, p_reader_id, p_instance_id);
        END IF;
        RETURN QUERY SELECT v_taken.id, v_taken.queue_id, v_taken.sender_id,
            v_taken.receiver_id, v_taken.context, v_taken.priority, v_taken.created_at,
            v_taken.body, v_lease.deliveries, v_lease.delivery_id, v_taken.dead_from,
            v_taken.failure, v_taken.properties;
    END LOOP;
END;
$$;

-- courier_read_v3 with a selector: peek or pop the first visible message it matches.
CREATE FUNCTION courier_read_v4(
    p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text, p_pop boolean,
    p_lease_ms integer, p_instance_id bigint, p_selector jsonpath, p_vars jsonb,
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
BEGIN
    IF p_selector IS NULL THEN
        SELECT * INTO status, id, queue_id, sender_id, receiver_id, context, priority,
               created_at, body, deliveries, delivery_id, dead_from, failure, properties,
               exec_ns
        FROM courier_read_v3(p_reader_id, p_queue_id, p_sender_id, p_order, p_pop,
                             p_lease_ms, p_instance_id);
        RETURN;
    END IF;
    PERFORM courier_check_read_v1(
        p_reader_id, p_queue_id, p_sender_id, p_order, p_pop, p_lease_ms);
    IF p_pop THEN
        SELECT 0, t.* INTO status, id, queue_id, sender_id, receiver_id, context, priority,
               created_at, body, deliveries, delivery_id, dead_from, failure, properties
        FROM courier_take_selected_v1(p_reader_id, p_queue_id, p_sender_id, p_order, 1,
                                      p_lease_ms, p_instance_id, p_selector, p_vars) t;
    ELSE
        FOR v_attempt IN 1..100 LOOP
            v_id := (courier_select_ids_v1(p_reader_id, p_queue_id, p_sender_id, p_order, 1,
                                           false, p_selector, p_vars))[1];
            EXIT WHEN v_id IS NULL;
            SELECT 0, m.id, m.queue_id, m.sender_id, m.receiver_id, m.context, m.priority,
                   m.created_at, m.body, m.deliveries, NULL, m.dead_from, m.failure,
                   m.properties
            INTO status, id, queue_id, sender_id, receiver_id, context, priority,
                 created_at, body, deliveries, delivery_id, dead_from, failure, properties
            FROM courier_messages m WHERE m.id = v_id;
            EXIT WHEN FOUND;  -- else a pop took the picked message: pick again
        END LOOP;
        IF v_id IS NOT NULL AND status IS NULL THEN  -- every peek lost its race
            PERFORM courier_fail_v1(16, 'a peek lost 100 races in a row to concurrent pops');
        END IF;
    END IF;
    IF status IS NULL THEN  -- nothing matched
        status := CASE WHEN p_queue_id IS NULL THEN 4 ELSE 5 END;
    END IF;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- courier_pop_many_v2 with a selector: up to p_count matching messages, in read order.
CREATE FUNCTION courier_pop_many_v3(
    p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text,
    p_count integer, p_lease_ms integer, p_instance_id bigint, p_selector jsonpath,
    p_vars jsonb)
RETURNS TABLE (id bigint, queue_id bigint, sender_id bigint, receiver_id bigint,
               context bigint, priority smallint, created_at timestamptz, body bytea,
               deliveries integer, delivery_id bigint, dead_from bigint, failure text,
               properties jsonb, exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    IF p_selector IS NULL THEN
        RETURN QUERY
        SELECT * FROM courier_pop_many_v2(p_reader_id, p_queue_id, p_sender_id, p_order,
                                          p_count, p_lease_ms, p_instance_id);
        RETURN;
    END IF;
    IF p_count IS NULL OR p_count < 1 THEN
        PERFORM courier_fail_v1(10, 'a batch read takes at least one message');
    END IF;
    IF p_queue_id IS NULL THEN
        PERFORM courier_fail_v1(10, 'a batch read needs a queue');
    END IF;
    PERFORM courier_check_read_v1(
        p_reader_id, p_queue_id, p_sender_id, p_order, true, coalesce(p_lease_ms, 0));
    RETURN QUERY
    SELECT t.*, courier_elapsed_ns_v1(v_started)
    FROM courier_take_selected_v1(p_reader_id, p_queue_id, p_sender_id, p_order, p_count,
                                  coalesce(p_lease_ms, 0), p_instance_id, p_selector,
                                  p_vars) t;
END;
$$;

-- == Disabled clients, asked for after a lost notification (migration 0022) ========
-- Disabling a client notifies every middleware on 'courier_clients' (migration
-- 0013), and each ends that client's session at once. A middleware whose LISTEN
-- connection was down meanwhile never hears of it, so once it listens again it asks
-- which of the clients logged in on it are disabled, and ends their sessions then.
CREATE FUNCTION courier_disabled_clients_v1(p_client_ids bigint[])
RETURNS TABLE (client_id bigint, exec_ns bigint)
LANGUAGE sql STABLE AS $$
    SELECT c.id, 0::bigint FROM courier_clients c WHERE c.id = ANY (p_client_ids) AND c.disabled
$$;

-- == Nodes: several PostgreSQL servers as one Courier (migration 0020) ================
-- Every node holds the whole schema. The first node (node 1) is also the control
-- node: its courier_nodes lists the cluster, its courier_queue_homes says which
-- node holds each queue, and it keeps the clients, their sessions, the middleware
-- registry and the topics. Another node holds queues, their messages and leases,
-- and a copy of every client row (same id) for its foreign keys.
--
-- Ids never collide across nodes: node k hands out queue, message and delivery
-- ids from (k - 1) * 2^48 + 1 on, so any of them names its node (id >> 48, plus
-- one) and a middleware routes a request without asking anyone.

CREATE TABLE courier_nodes (
    id        integer     PRIMARY KEY CHECK (id BETWEEN 1 AND 32),
    dsn       text        NOT NULL,
    state     text        NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'removed')),
    -- The node's capacity: how many clients it serves well (used by the balancer).
    capacity  integer     CHECK (capacity > 0),
    added_at  timestamptz NOT NULL DEFAULT now()
);

-- Which node a node is: 1 unless `courier node add` made it another.
CREATE TABLE courier_node_self (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    id  integer NOT NULL CHECK (id BETWEEN 1 AND 32)
);
INSERT INTO courier_node_self (id) VALUES (1);

-- Where each queue lives. The control node's copy is the one that counts; it keeps
-- queue names unique across the cluster.
CREATE TABLE courier_queue_homes (
    name    text    PRIMARY KEY,
    node_id integer NOT NULL
);
INSERT INTO courier_queue_homes (name, node_id) SELECT q.name, 1 FROM courier_queues q;

-- A queue created on this node claims its name here; on the control node a name
-- another node holds makes the create fail with QUEUE_EXISTS (2).
CREATE FUNCTION courier_claim_queue_home_v1() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM courier_queue_homes h
        WHERE h.name = OLD.name AND h.node_id = (SELECT s.id FROM courier_node_self s);
        RETURN OLD;
    END IF;
    INSERT INTO courier_queue_homes (name, node_id)
    VALUES (NEW.name, (SELECT s.id FROM courier_node_self s))
    ON CONFLICT (name) DO NOTHING;
    IF NOT FOUND THEN
        PERFORM courier_fail_v1(2, format('queue %s exists', NEW.name));
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER courier_queues_home
    AFTER INSERT OR DELETE ON courier_queues
    FOR EACH ROW EXECUTE FUNCTION courier_claim_queue_home_v1();

-- On the control node: reserve a name for a queue about to be created on another
-- node (QUEUE_EXISTS when taken), and give it up again.
CREATE FUNCTION courier_reserve_queue_home_v1(
    p_name text, p_node_id integer, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    PERFORM courier_check_name_v1(p_name, 'queue');
    INSERT INTO courier_queue_homes (name, node_id) VALUES (p_name, p_node_id)
    ON CONFLICT (name) DO NOTHING;
    IF NOT FOUND THEN
        PERFORM courier_fail_v1(2, format('queue %s exists', p_name));
    END IF;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

CREATE FUNCTION courier_release_queue_home_v1(
    p_name text, p_node_id integer, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    DELETE FROM courier_queue_homes h WHERE h.name = p_name AND h.node_id = p_node_id;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- On the control node: the node a queue name lives on; NULL when none has it.
CREATE FUNCTION courier_queue_home_v1(p_name text, OUT node_id integer, OUT exec_ns bigint)
LANGUAGE sql STABLE AS $$
    SELECT (SELECT h.node_id FROM courier_queue_homes h WHERE h.name = p_name), 0::bigint
$$;

-- On the control node: the active node holding the fewest queues, where a new
-- queue goes (the lowest id among equals).
CREATE FUNCTION courier_place_queue_v1(OUT node_id integer, OUT exec_ns bigint)
LANGUAGE sql STABLE AS $$
    SELECT coalesce((
        SELECT n.id FROM courier_nodes n
        WHERE n.state = 'active'
        ORDER BY (SELECT count(*) FROM courier_queue_homes h WHERE h.node_id = n.id), n.id
        LIMIT 1), 1), 0::bigint
$$;

-- On a node joining a cluster: become node p_node_id. Refused once the node holds
-- queues or clients, since its ids would then overlap another node's.
CREATE FUNCTION courier_become_node_v1(p_node_id integer, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
    v_first   bigint := ((p_node_id - 1)::bigint << 48) + 1;
BEGIN
    IF (SELECT s.id FROM courier_node_self s) = p_node_id THEN
        exec_ns := courier_elapsed_ns_v1(v_started);
        RETURN;
    END IF;
    IF p_node_id < 2 OR EXISTS (SELECT FROM courier_queues) OR EXISTS (SELECT FROM courier_clients) THEN
        PERFORM courier_fail_v1(10, format(
            'only an empty Courier database can become node %s', p_node_id));
    END IF;
    UPDATE courier_node_self SET id = p_node_id;
    EXECUTE format('ALTER TABLE courier_queues ALTER COLUMN id RESTART WITH %s', v_first);
    EXECUTE format('ALTER TABLE courier_messages ALTER COLUMN id RESTART WITH %s', v_first);
    PERFORM setval('courier_delivery_ids', v_first, false);
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- On a node other than the control node: the copy of a client (same id, name,
-- mode and admin flag; never its secret), made or brought up to date.
CREATE FUNCTION courier_adopt_client_v1(
    p_id bigint, p_name text, p_mode text, p_admin boolean, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    INSERT INTO courier_clients (id, name, mode, admin)
    OVERRIDING SYSTEM VALUE VALUES (p_id, p_name, p_mode, p_admin)
    ON CONFLICT (id) DO UPDATE SET mode = EXCLUDED.mode, admin = EXCLUDED.admin;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- On any node: give back the leases taken through middleware instances that are
-- gone (the control node's registry found them dead or they stopped).
CREATE FUNCTION courier_release_instances_v1(p_instance_ids bigint[], OUT released integer, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    released := courier_release_instance_leases_v1(p_instance_ids);
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- == Replicated queues (migration 0021) ==============================================
-- A replicated queue is a set of k member queues, each an ordinary queue on its own
-- node. Producers and consumers join it with their role and are each given one
-- member for as long as their session lasts; the control node keeps the members
-- and who joined which, and chooses the member under a lock on the replicated
-- queue's row, so concurrent joins see each other's counts.
--   balanced     the member with the fewest clients of the joining role (ties: the
--                one with the most of the other role, then the lowest number), which
--                keeps each member's share of producers and of consumers as close
--                to 1/k as the counts allow;
--   round_robin  the next member in turn, whatever the role (for comparison).

CREATE TABLE courier_replicated_queues (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name       text        NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 255),
    policy     text        NOT NULL CHECK (policy IN ('balanced', 'round_robin')),
    created_by bigint      REFERENCES courier_clients (id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    joins      bigint      NOT NULL DEFAULT 0,  -- round robin's turn
    -- The members it was created with: the controller removes none below this.
    min_members integer    NOT NULL DEFAULT 1 CHECK (min_members > 0)
);

CREATE TABLE courier_replicas (
    replicated_id bigint  NOT NULL REFERENCES courier_replicated_queues (id) ON DELETE CASCADE,
    member_no     integer NOT NULL CHECK (member_no > 0),
    queue_id      bigint  NOT NULL UNIQUE,
    queue_name    text    NOT NULL,
    node_id       integer NOT NULL,
    -- A member being removed: it gets no new places; the controller moves its
    -- messages to the others and deletes it once it holds none (migration 0024).
    draining      boolean NOT NULL DEFAULT false,
    PRIMARY KEY (replicated_id, member_no)
);

CREATE TABLE courier_replica_clients (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    replicated_id bigint      NOT NULL,
    member_no     integer     NOT NULL,
    client_id     bigint      NOT NULL REFERENCES courier_clients (id) ON DELETE CASCADE,
    -- The middleware the client joined through: its end ends the client's places.
    instance_id   bigint      REFERENCES courier_instances (id) ON DELETE CASCADE,
    role          text        NOT NULL CHECK (role IN ('producer', 'consumer')),
    joined_at     timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (replicated_id, member_no)
        REFERENCES courier_replicas (replicated_id, member_no) ON DELETE CASCADE
);
CREATE INDEX courier_replica_clients_member
    ON courier_replica_clients (replicated_id, member_no, role);
CREATE INDEX courier_replica_clients_client ON courier_replica_clients (client_id);

-- A session that ends (logout, a closed connection, its middleware gone) ends the
-- client's places in replicated queues taken through it.
CREATE FUNCTION courier_end_replica_places_v1() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM courier_replica_clients c
    WHERE c.client_id = OLD.id AND c.instance_id = OLD.session_instance_id;
    RETURN NULL;
END;
$$;

CREATE TRIGGER courier_clients_end_replica_places
    AFTER UPDATE OF session_instance_id ON courier_clients
    FOR EACH ROW
    WHEN (OLD.session_instance_id IS NOT NULL
          AND OLD.session_instance_id IS DISTINCT FROM NEW.session_instance_id)
    EXECUTE FUNCTION courier_end_replica_places_v1();

-- The k active nodes holding the fewest queues, for the members of a new replicated
-- queue; BAD_REQUEST when the cluster has fewer.
CREATE FUNCTION courier_place_replicas_v1(p_replicas integer)
RETURNS TABLE (node_id integer, exec_ns bigint)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_nodes integer := greatest(1, (SELECT count(*) FROM courier_nodes n WHERE n.state = 'active'));
BEGIN
    IF p_replicas IS NULL OR p_replicas < 1 OR p_replicas > v_nodes THEN
        PERFORM courier_fail_v1(10, format(
            'a replicated queue of %s members needs as many nodes; the cluster has %s',
            p_replicas, v_nodes));
    END IF;
    RETURN QUERY
    SELECT n.id, 0::bigint FROM (
        SELECT 1 AS id WHERE NOT EXISTS (SELECT FROM courier_nodes)
        UNION ALL SELECT n.id FROM courier_nodes n WHERE n.state = 'active'
    ) n
    ORDER BY (SELECT count(*) FROM courier_queue_homes h WHERE h.node_id = n.id), n.id
    LIMIT p_replicas;
END;
$$;

CREATE FUNCTION courier_create_replicated_v1(
    p_name text, p_policy text, p_creator bigint, p_min_members integer,
    OUT id bigint, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    PERFORM courier_check_name_v1(p_name, 'replicated queue');
    IF p_policy IS NULL OR p_policy NOT IN ('balanced', 'round_robin') THEN
        PERFORM courier_fail_v1(10, 'the policy must be balanced or round_robin');
    END IF;
    INSERT INTO courier_replicated_queues (name, policy, created_by, min_members)
    VALUES (p_name, p_policy, p_creator, p_min_members)
    ON CONFLICT (name) DO NOTHING
    RETURNING courier_replicated_queues.id INTO id;
    IF NOT FOUND THEN
        PERFORM courier_fail_v1(2, format('replicated queue %s exists', p_name));
    END IF;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

CREATE FUNCTION courier_add_replica_v1(
    p_replicated_id bigint, p_member_no integer, p_queue_id bigint, p_queue_name text,
    p_node_id integer, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    INSERT INTO courier_replicas (replicated_id, member_no, queue_id, queue_name, node_id)
    VALUES (p_replicated_id, p_member_no, p_queue_id, p_queue_name, p_node_id);
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- Who may delete a replicated queue: its creator or an admin (NOT_AUTHORISED (13)
-- for anyone else, QUEUE_NOT_FOUND (1) when there is none); its id and members,
-- draining ones too, for the deletion.
CREATE FUNCTION courier_replicated_to_delete_v1(p_name text, p_actor bigint)
RETURNS TABLE (id bigint, queue_id bigint, exec_ns bigint)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_queue courier_replicated_queues%ROWTYPE;
BEGIN
    SELECT * INTO v_queue FROM courier_replicated_queues r WHERE r.name = p_name;
    IF NOT FOUND THEN
        PERFORM courier_fail_v1(1, format('replicated queue %s does not exist', p_name));
    END IF;
    IF p_actor IS NOT NULL AND p_actor IS DISTINCT FROM v_queue.created_by
       AND NOT courier_is_admin_v1(p_actor) THEN
        PERFORM courier_fail_v1(13, format(
            'only the owner of replicated queue %s or an admin may delete it', p_name));
    END IF;
    RETURN QUERY
    SELECT v_queue.id, m.queue_id, 0::bigint FROM courier_replicas m
    WHERE m.replicated_id = v_queue.id ORDER BY m.member_no;
END;
$$;

CREATE FUNCTION courier_drop_replicated_v1(p_replicated_id bigint, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    DELETE FROM courier_replicated_queues r WHERE r.id = p_replicated_id;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- A replicated queue's members with their producers and consumers, by member;
-- QUEUE_NOT_FOUND (1) when there is no replicated queue of that name.
CREATE FUNCTION courier_replicated_v1(p_name text)
RETURNS TABLE (
    id bigint, name text, policy text, member_no integer, queue_id bigint,
    queue_name text, node_id integer, producers integer, consumers integer, exec_ns bigint)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY
    SELECT r.id, r.name, r.policy, m.member_no, m.queue_id, m.queue_name, m.node_id,
           (SELECT count(*)::integer FROM courier_replica_clients c
            WHERE c.replicated_id = r.id AND c.member_no = m.member_no AND c.role = 'producer'),
           (SELECT count(*)::integer FROM courier_replica_clients c
            WHERE c.replicated_id = r.id AND c.member_no = m.member_no AND c.role = 'consumer'),
           0::bigint
    FROM courier_replicated_queues r
    JOIN courier_replicas m ON m.replicated_id = r.id AND NOT m.draining
    WHERE r.name = p_name
    ORDER BY m.member_no;
    IF NOT FOUND THEN
        PERFORM courier_fail_v1(1, format('replicated queue %s does not exist', p_name));
    END IF;
END;
$$;

-- A producer or consumer joins: it is given a member by the queue's policy.
CREATE FUNCTION courier_join_replicated_v1(
    p_name text, p_client_id bigint, p_instance_id bigint, p_role text,
    OUT place_id bigint, OUT member_no integer, OUT queue_id bigint, OUT queue_name text,
    OUT replicas integer, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
    v_queue   courier_replicated_queues%ROWTYPE;
BEGIN
    IF p_role IS NULL OR p_role NOT IN ('producer', 'consumer') THEN
        PERFORM courier_fail_v1(10, 'the role must be producer or consumer');
    END IF;
    -- The session must still be there (and stays, until this commits): a join racing
    -- its client's logout would otherwise keep a place no session ends.
    PERFORM FROM courier_clients c
    WHERE c.id = p_client_id AND c.session_instance_id = p_instance_id FOR SHARE;
    IF NOT FOUND THEN
        PERFORM courier_fail_v1(14, 'the session has ended');
    END IF;
    SELECT * INTO v_queue FROM courier_replicated_queues r WHERE r.name = p_name FOR UPDATE;
    SELECT count(*)::integer INTO replicas
    FROM courier_replicas m WHERE m.replicated_id = v_queue.id AND NOT m.draining;
    IF v_queue.id IS NULL OR replicas = 0 THEN  -- none, or not made yet
        PERFORM courier_fail_v1(1, format('replicated queue %s does not exist', p_name));
    END IF;
    IF v_queue.policy = 'round_robin' THEN
        SELECT m.member_no, m.queue_id, m.queue_name INTO member_no, queue_id, queue_name
        FROM courier_replicas m WHERE m.replicated_id = v_queue.id AND NOT m.draining
        ORDER BY m.member_no OFFSET (v_queue.joins % replicas) LIMIT 1;
        UPDATE courier_replicated_queues r SET joins = r.joins + 1 WHERE r.id = v_queue.id;
    ELSE
        SELECT m.member_no, m.queue_id, m.queue_name INTO member_no, queue_id, queue_name
        FROM courier_replicas m
        CROSS JOIN LATERAL (
            SELECT count(*) FILTER (WHERE c.role = p_role) AS same,
                   count(*) FILTER (WHERE c.role <> p_role) AS other
            FROM courier_replica_clients c
            WHERE c.replicated_id = v_queue.id AND c.member_no = m.member_no) counts
        WHERE m.replicated_id = v_queue.id AND NOT m.draining
        ORDER BY counts.same, counts.other DESC, m.member_no
        LIMIT 1;
    END IF;
    INSERT INTO courier_replica_clients (replicated_id, member_no, client_id, instance_id, role)
    VALUES (v_queue.id, member_no, p_client_id, p_instance_id, p_role)
    RETURNING courier_replica_clients.id INTO place_id;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- A producer or consumer leaves its place (its own only); NO_MESSAGE-free: leaving a
-- place already gone is not an error.
CREATE FUNCTION courier_leave_replicated_v1(
    p_place_id bigint, p_client_id bigint, OUT left_place boolean, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    DELETE FROM courier_replica_clients c WHERE c.id = p_place_id AND c.client_id = p_client_id;
    left_place := FOUND;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

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

-- == The provisioning controller's inputs and decisions (migration 0024) ==========
-- Every middleware counts what it stored in and took from each queue, and every
-- second reports its running totals for the members of replicated queues here
-- (one row per member and middleware; totals, so a report that is lost or repeated
-- changes nothing). The controller sums them over the middleware to get each
-- member's production and consumption rates, and records what it decided.

CREATE TABLE courier_member_counts (
    queue_id    bigint      NOT NULL REFERENCES courier_replicas (queue_id) ON DELETE CASCADE,
    instance_id bigint      NOT NULL,
    sent        bigint      NOT NULL,
    taken       bigint      NOT NULL,
    reported_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue_id, instance_id)
);

-- A middleware's running totals; queues that are not members are left out.
CREATE FUNCTION courier_report_counts_v1(
    p_instance_id bigint, p_queue_ids bigint[], p_sent bigint[], p_taken bigint[],
    OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    INSERT INTO courier_member_counts (queue_id, instance_id, sent, taken)
    SELECT u.queue_id, p_instance_id, u.sent, u.taken
    FROM unnest(p_queue_ids, p_sent, p_taken) AS u(queue_id, sent, taken)
    JOIN courier_replicas r ON r.queue_id = u.queue_id
    ON CONFLICT (queue_id, instance_id) DO UPDATE
        SET sent = EXCLUDED.sent, taken = EXCLUDED.taken, reported_at = now();
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- Every member's totals over all middleware.
CREATE FUNCTION courier_member_counts_v1()
RETURNS TABLE (queue_id bigint, sent bigint, taken bigint, exec_ns bigint)
LANGUAGE sql STABLE AS $$
    SELECT c.queue_id, sum(c.sent)::bigint, sum(c.taken)::bigint, 0::bigint
    FROM courier_member_counts c GROUP BY c.queue_id ORDER BY c.queue_id
$$;

-- The queues that are members of replicated queues (the middleware counts those).
CREATE FUNCTION courier_member_queues_v1()
RETURNS TABLE (queue_id bigint, exec_ns bigint)
LANGUAGE sql STABLE AS $$
    SELECT r.queue_id, 0::bigint FROM courier_replicas r ORDER BY r.queue_id
$$;

-- The replicated queues, for the controller's rounds, with the members each keeps.
CREATE FUNCTION courier_replicated_names_v1()
RETURNS TABLE (name text, min_members integer, exec_ns bigint)
LANGUAGE sql STABLE AS $$
    SELECT r.name, r.min_members, 0::bigint FROM courier_replicated_queues r ORDER BY r.id
$$;

-- The nodes, as middleware and the controller read them (no rows: node 1 alone).
CREATE FUNCTION courier_nodes_v1()
RETURNS TABLE (id integer, dsn text, state text, capacity integer, exec_ns bigint)
LANGUAGE sql STABLE AS $$
    SELECT n.id, n.dsn, n.state, n.capacity, 0::bigint FROM courier_nodes n ORDER BY n.id
$$;

-- A member added by the controller takes the next number (draining members keep
-- theirs), and belongs to the replicated queue's creator.
CREATE FUNCTION courier_next_member_v1(
    p_replicated_id bigint, OUT member_no integer, OUT created_by bigint, OUT exec_ns bigint)
LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT max(m.member_no) FROM courier_replicas m
                     WHERE m.replicated_id = p_replicated_id), 0) + 1,
           (SELECT r.created_by FROM courier_replicated_queues r WHERE r.id = p_replicated_id),
           0::bigint
$$;

-- A member taken out: it drains (no new places go to it); its clients lose theirs.
CREATE FUNCTION courier_remove_replica_v1(
    p_replicated_id bigint, p_member_no integer, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    UPDATE courier_replicas m SET draining = true
    WHERE m.replicated_id = p_replicated_id AND m.member_no = p_member_no;
    DELETE FROM courier_replica_clients c
    WHERE c.replicated_id = p_replicated_id AND c.member_no = p_member_no;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- The members of a replicated queue being removed.
CREATE FUNCTION courier_draining_replicas_v1(p_replicated_id bigint)
RETURNS TABLE (member_no integer, queue_id bigint, queue_name text, node_id integer, exec_ns bigint)
LANGUAGE sql STABLE AS $$
    SELECT m.member_no, m.queue_id, m.queue_name, m.node_id, 0::bigint FROM courier_replicas m
    WHERE m.replicated_id = p_replicated_id AND m.draining ORDER BY m.member_no
$$;

-- A drained member whose queue is gone leaves the replicated queue.
CREATE FUNCTION courier_drop_replica_v1(
    p_replicated_id bigint, p_member_no integer, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    DELETE FROM courier_replicas m
    WHERE m.replicated_id = p_replicated_id AND m.member_no = p_member_no AND m.draining;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- What the controller decided, newest last (the console shows the latest).
CREATE TABLE courier_cluster_decisions (
    id         bigint           GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    decided_at timestamptz      NOT NULL DEFAULT now(),
    replicated text             NOT NULL,
    decision   text             NOT NULL CHECK (decision IN ('add', 'remove', 'move')),
    member_no  integer          NOT NULL,
    node_id    integer          NOT NULL,
    moved      integer          NOT NULL DEFAULT 0,
    clients    integer          NOT NULL,
    capacity   integer          NOT NULL,
    load       double precision NOT NULL,
    length     bigint           NOT NULL
);

CREATE FUNCTION courier_record_decision_v1(
    p_replicated text, p_decision text, p_member_no integer, p_node_id integer, p_moved integer,
    p_clients integer, p_capacity integer, p_load double precision, p_length bigint,
    OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    INSERT INTO courier_cluster_decisions (
        replicated, decision, member_no, node_id, moved, clients, capacity, load, length)
    VALUES (p_replicated, p_decision, p_member_no, p_node_id, p_moved, p_clients, p_capacity,
            p_load, p_length);
    -- Keep the latest thousand.
    DELETE FROM courier_cluster_decisions d
    WHERE d.id <= (SELECT max(e.id) - 1000 FROM courier_cluster_decisions e);
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;

-- == Deleting a queue reads no other queue (migration 0028) =======================
-- A queue's dead_letter_queue_id refers to another queue and is cleared when that
-- queue is deleted, so every delete looks for the queues naming it as their dead
-- letter queue. Without an index on the column that look read the whole queue
-- table: every delete cost more the more queues there were. A partial index (most
-- queues have no dead letter queue) makes it one index probe.
CREATE INDEX courier_queues_dead_letter ON courier_queues (dead_letter_queue_id)
    WHERE dead_letter_queue_id IS NOT NULL;

-- == One trigger after a statement that stores messages (migration 0037) ===========
-- One statement trigger, courier_messages_stored, after every statement that stores
-- messages. First it does what a foreign key did for each stored message, once per
-- statement (migration 0036): each distinct queue and sender is looked up by key and
-- locked against deletion until the statement's transaction ends (FOR KEY SHARE),
-- and a missing one fails the statement (QUEUE_NOT_FOUND before CLIENT_NOT_FOUND).
-- Then it announces the messages (migration 0034): one notification per distinct
-- (queue, receiver) with its count, for the watched queues only, or for every queue
-- while a middleware that does not watch is registered. The watch locks are taken,
-- in queue order, by one statement and the watches read by the next, whose snapshot
-- is newer than every lock (see courier_watch_queue_v1); the row locks come before
-- the watch locks. Until migration 0037 these were two triggers
-- (courier_check_message_references_v1, then courier_notify_messages_v4), each
-- setting its function and the statement's transition table up again, and the check
-- took two statements: an insert of ten messages took 0.50–0.55 ms against 0.44–0.51
-- ms now (pgbench, one client; 0.29–0.38 ms with no trigger at all).
CREATE FUNCTION courier_messages_stored_v1()
RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_missing_queue bigint;
    v_missing_sender bigint;
BEGIN
    -- The queues are looked up (and locked) before the senders, each in id order.
    SELECT (SELECT d.queue_id
            FROM (SELECT DISTINCT n.queue_id FROM stored_messages n ORDER BY 1) d
            WHERE NOT EXISTS (SELECT FROM courier_queues q
                              WHERE q.id = d.queue_id FOR KEY SHARE)
            LIMIT 1),
           (SELECT d.sender_id
            FROM (SELECT DISTINCT n.sender_id FROM stored_messages n ORDER BY 1) d
            WHERE NOT EXISTS (SELECT FROM courier_clients c
                              WHERE c.id = d.sender_id FOR KEY SHARE)
            LIMIT 1)
    INTO v_missing_queue, v_missing_sender;
    IF v_missing_queue IS NOT NULL THEN
        PERFORM courier_fail_v1(1, format('queue %s does not exist', v_missing_queue));
    END IF;
    IF v_missing_sender IS NOT NULL THEN
        PERFORM courier_fail_v1(6, format('client %s does not exist', v_missing_sender));
    END IF;
    -- The watch locks in one statement, the watches read by the next.
    PERFORM pg_advisory_xact_lock_shared(1131377779, (q.queue_id % 2147483648)::integer)
    FROM (SELECT DISTINCT n.queue_id FROM stored_messages n ORDER BY 1) q;
    PERFORM pg_notify('courier_messages',
                      s.queue_id::text || ':' || coalesce(s.receiver_id::text, '') || ':'
                      || s.stored::text)
    FROM (SELECT n.queue_id, n.receiver_id, count(*) AS stored
          FROM stored_messages n GROUP BY n.queue_id, n.receiver_id) s
    WHERE EXISTS (SELECT FROM courier_queue_watches w
                  WHERE w.queue_id = s.queue_id AND w.until > now())
       OR EXISTS (SELECT FROM courier_instances i WHERE NOT i.watches_queues);
    RETURN NULL;
END;
$$;

CREATE TRIGGER courier_messages_stored
    AFTER INSERT ON courier_messages
    REFERENCING NEW TABLE AS stored_messages
    FOR EACH STATEMENT EXECUTE FUNCTION courier_messages_stored_v1();
