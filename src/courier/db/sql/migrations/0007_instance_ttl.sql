-- Migration 0007: an instance is expired by its own ttl, the one it registered with,
-- not by the ttl of whichever instance looks. The whole current schema is schema.sql.

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
