-- Migration 0008: an announcement says how many messages a statement stored for each
-- (queue, receiver), so a middleware wakes only as many waiting receives as those
-- messages can satisfy: '<queue_id>:<receiver_id or empty>:<count>'.
-- Middleware from before this migration read that payload as malformed and wake
-- nobody (their receives then wait out their timeouts): upgrade them together.

DROP TRIGGER courier_messages_notify ON courier_messages;
DROP FUNCTION courier_notify_messages_v2();

-- One notification per distinct (queue, receiver) a statement stored, with its count.
CREATE FUNCTION courier_notify_messages_v3()
RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('courier_messages',
                      s.queue_id::text || ':' || coalesce(s.receiver_id::text, '') || ':'
                      || s.stored::text)
    FROM (SELECT n.queue_id, n.receiver_id, count(*) AS stored
          FROM stored_messages n GROUP BY n.queue_id, n.receiver_id) s;
    RETURN NULL;
END;
$$;

CREATE TRIGGER courier_messages_notify
    AFTER INSERT ON courier_messages
    REFERENCING NEW TABLE AS stored_messages
    FOR EACH STATEMENT EXECUTE FUNCTION courier_notify_messages_v3();
