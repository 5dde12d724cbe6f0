-- Credentials and roles: a client proves its secret (SCRAM-SHA-256), can be an admin
-- or disabled, and only a queue's owner (its creator) or an admin may delete or
-- configure it.

-- == Clients: role, disabling, SCRAM verifier ========================================

-- The secret itself is never stored: only the SCRAM-SHA-256 verifier derived from it
-- with PBKDF2 (salt, iterations, StoredKey, ServerKey). A login then costs the
-- middleware two HMACs; the slow derivation is the client's. NULL: no secret set (a
-- client from before this migration, or one registered on a server with open login),
-- which cannot log in where credentials are required until an admin resets it.
--
-- An admin is a read_write client with ``admin`` set, so every check of the data path
-- that a sender is read_write holds for admins unchanged; functions that report a
-- client (register v2, login v2) say mode 'admin' for one.
ALTER TABLE courier_clients
    ADD COLUMN admin           boolean NOT NULL DEFAULT false,
    ADD COLUMN disabled        boolean NOT NULL DEFAULT false,
    ADD COLUMN auth_salt       bytea,
    ADD COLUMN auth_iterations integer CHECK (auth_iterations >= 4096),
    ADD COLUMN auth_stored_key bytea CHECK (length(auth_stored_key) = 32),
    ADD COLUMN auth_server_key bytea CHECK (length(auth_server_key) = 32);

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
