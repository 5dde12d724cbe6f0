-- Migration 0002: what the management console needs (docs/console.md).
-- The whole current schema, documented, is schema.sql.

-- The console pages through messages by id (keyset pagination) per queue, per
-- sender and per receiver, and counts them with a cap; these indexes keep every one
-- of those queries a short index walk. The queue index carries the columns a
-- filtered queue page tests and the oldest message's time, so those walks need not
-- visit the table. A view joins the names the console shows, and a stored function
-- deletes one message for an admin.

CREATE INDEX courier_messages_console_queue
    ON courier_messages (queue_id, id)
    INCLUDE (sender_id, receiver_id, priority, created_at);
CREATE INDEX courier_messages_console_sender
    ON courier_messages (sender_id, id);
CREATE INDEX courier_messages_console_receiver
    ON courier_messages (receiver_id, id)
    WHERE receiver_id IS NOT NULL;

-- Messages with the names of their queue, sender and receiver (NULL when the
-- receiver is not a registered client).
CREATE VIEW courier_console_messages_v1 AS
SELECT m.id,
       m.queue_id AS queue,
       q.name AS queue_name,
       m.sender_id AS sender,
       s.name AS sender_name,
       m.receiver_id AS receiver,
       r.name AS receiver_name,
       m.context,
       m.priority::integer AS priority,
       m.created_at,
       m.body
FROM courier_messages m
JOIN courier_queues q ON q.id = m.queue_id
LEFT JOIN courier_clients s ON s.id = m.sender_id
LEFT JOIN courier_clients r ON r.id = m.receiver_id;

-- Deletes one message; returns the queue it was in. NO_MESSAGE (CQ004) when it is
-- gone, e.g. popped a moment earlier: every message leaves exactly once.
CREATE FUNCTION courier_delete_message_v1(
    p_message_id bigint, OUT queue_id bigint, OUT exec_ns bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_started timestamptz := clock_timestamp();
BEGIN
    DELETE FROM courier_messages m WHERE m.id = p_message_id
    RETURNING m.queue_id INTO queue_id;
    IF NOT FOUND THEN
        PERFORM courier_fail_v1(4, format('message %s does not exist', p_message_id));
    END IF;
    exec_ns := courier_elapsed_ns_v1(v_started);
END;
$$;
