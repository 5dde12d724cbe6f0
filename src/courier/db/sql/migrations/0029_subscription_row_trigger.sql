-- == A subscription's queue goes with it, row by row (migration 0029) ==============
-- The trigger that drops a removed subscription's queue ran once per statement, so
-- it ran on every delete of a queue as well: the cascade into courier_subscriptions
-- is a statement, even when no subscription refers to the queue. Most queues have
-- none, and the empty run cost about a third of deleting a queue. A row trigger
-- runs only for subscriptions actually removed; what it drops does not change.
CREATE OR REPLACE FUNCTION courier_drop_subscription_queues_v1()
RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- When the queue itself was deleted first, there is nothing left to delete.
    DELETE FROM courier_queues q WHERE q.id = OLD.queue_id;
    RETURN NULL;
END;
$$;

DROP TRIGGER courier_subscriptions_gone ON courier_subscriptions;
CREATE TRIGGER courier_subscriptions_gone
    AFTER DELETE ON courier_subscriptions
    FOR EACH ROW EXECUTE FUNCTION courier_drop_subscription_queues_v1();
