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
