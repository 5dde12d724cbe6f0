-- Migration 0005: a dead middleware is noticed in well under a second
-- (docs/architecture.md, "Failover"). The whole current schema is schema.sql.

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

-- Opens a session held by p_instance_id; one live session per client. A session
-- held by an instance that is gone is taken over (the instance is removed first), so
-- a client whose middleware died logs in on a survivor at once.
CREATE OR REPLACE FUNCTION courier_login_v1(
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
