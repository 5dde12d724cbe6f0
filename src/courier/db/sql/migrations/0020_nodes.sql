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
