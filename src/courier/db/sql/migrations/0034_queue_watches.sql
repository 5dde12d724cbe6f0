-- Migration 0034: a statement that stores messages notifies only for the queues a
-- middleware waits on.
-- The whole current schema, documented, is schema.sql.
--
-- PostgreSQL lets one notifying transaction commit at a time: from its pre-commit
-- until its commit record is flushed it holds a lock of the whole database. Every
-- statement storing messages notified, so the batched calls of different middleware
-- never shared a flush of the write-ahead log, and every listening middleware woke
-- for every batch. Now a middleware watches a queue before it waits on it
-- (courier_watch_queue_v1), and courier_notify_messages_v4 notifies only for the
-- queues watched. A middleware older than this migration does not watch: while one
-- is registered (courier_instances.watches_queues false) every statement notifies,
-- as before.

CREATE TABLE courier_queue_watches (
    queue_id bigint      PRIMARY KEY,
    until    timestamptz NOT NULL
);

CREATE INDEX courier_queue_watches_until ON courier_queue_watches (until);

ALTER TABLE courier_instances ADD COLUMN watches_queues boolean NOT NULL DEFAULT false;

CREATE INDEX courier_instances_not_watching ON courier_instances (id) WHERE NOT watches_queues;

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

-- courier_notify_messages_v3 for the watched queues only, or for every queue while a
-- middleware that does not watch is registered. The watch locks are taken, in queue
-- order, by one statement and the watches read by the next, whose snapshot is newer
-- than every lock (see courier_watch_queue_v1).
CREATE FUNCTION courier_notify_messages_v4()
RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
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

DROP TRIGGER courier_messages_notify ON courier_messages;

CREATE TRIGGER courier_messages_notify
    AFTER INSERT ON courier_messages
    REFERENCING NEW TABLE AS stored_messages
    FOR EACH STATEMENT EXECUTE FUNCTION courier_notify_messages_v4();
