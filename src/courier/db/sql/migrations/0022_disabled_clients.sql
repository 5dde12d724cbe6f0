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
