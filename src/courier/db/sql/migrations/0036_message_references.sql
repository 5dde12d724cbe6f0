-- Migration 0036: a statement that stores messages checks their queues and senders
-- once, not once per message.
-- The whole current schema, documented, is schema.sql.
--
-- courier_messages had two foreign keys, to its queue and to its sender. PostgreSQL
-- checks a foreign key with a query per inserted row, run from a trigger per row:
-- a batch of five messages to one queue from one sender ran ten such queries, about
-- as much of the database's CPU as inserting the rows into the table and its nine
-- indexes. Both checks now run once per statement, from a statement trigger
-- (courier_check_message_references_v1): each distinct queue and sender is looked up
-- by key and locked as the foreign key locked it (FOR KEY SHARE: a queue cannot be
-- deleted under a send that has not committed). The trigger fires before the one
-- that announces the messages, so the row locks still come before the announcement's
-- advisory locks. A missing queue or sender fails the statement with QUEUE_NOT_FOUND
-- or CLIENT_NOT_FOUND rather than a foreign key violation. Deleting a queue deletes
-- its messages through a trigger of its own in place of ON DELETE CASCADE, planned
-- once. Messages are never updated, and clients never deleted, so nothing else the
-- keys did is lost.
CREATE FUNCTION courier_check_message_references_v1()
RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_missing bigint;
BEGIN
    SELECT d.queue_id INTO v_missing
    FROM (SELECT DISTINCT n.queue_id FROM stored_messages n ORDER BY 1) d
    WHERE NOT EXISTS (SELECT FROM courier_queues q WHERE q.id = d.queue_id FOR KEY SHARE)
    LIMIT 1;
    IF FOUND THEN
        PERFORM courier_fail_v1(1, format('queue %s does not exist', v_missing));
    END IF;
    SELECT d.sender_id INTO v_missing
    FROM (SELECT DISTINCT n.sender_id FROM stored_messages n ORDER BY 1) d
    WHERE NOT EXISTS (SELECT FROM courier_clients c WHERE c.id = d.sender_id FOR KEY SHARE)
    LIMIT 1;
    IF FOUND THEN
        PERFORM courier_fail_v1(6, format('client %s does not exist', v_missing));
    END IF;
    RETURN NULL;
END;
$$;

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

ALTER TABLE courier_messages
    DROP CONSTRAINT courier_messages_queue_id_fkey,
    DROP CONSTRAINT courier_messages_sender_id_fkey;

-- Statement triggers fire in name order: this one before courier_messages_notify.
CREATE TRIGGER courier_messages_check_references
    AFTER INSERT ON courier_messages
    REFERENCING NEW TABLE AS stored_messages
    FOR EACH STATEMENT EXECUTE FUNCTION courier_check_message_references_v1();

CREATE TRIGGER courier_queues_messages
    AFTER DELETE ON courier_queues
    FOR EACH ROW EXECUTE FUNCTION courier_drop_queue_messages_v1();
