-- Live middleware instances (heartbeat younger than their ttl) and their sessions.
SELECT i.id,
       i.address,
       i.started_at,
       i.heartbeat_at,
       extract(epoch FROM clock_timestamp() - i.heartbeat_at)::float8 AS heartbeat_age_s,
       (SELECT count(*) FROM courier_clients c WHERE c.session_instance_id = i.id) AS clients
FROM courier_instances i
WHERE i.heartbeat_at + make_interval(secs => i.ttl_seconds) > now()
ORDER BY i.id;
