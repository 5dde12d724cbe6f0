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
