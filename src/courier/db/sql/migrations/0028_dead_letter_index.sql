-- == Deleting a queue reads no other queue (migration 0028) =======================
-- A queue's dead_letter_queue_id refers to another queue and is cleared when that
-- queue is deleted, so every delete looks for the queues naming it as their dead
-- letter queue. Without an index on the column that look read the whole queue
-- table: every delete cost more the more queues there were. A partial index (most
-- queues have no dead letter queue) makes it one index probe.
CREATE INDEX courier_queues_dead_letter ON courier_queues (dead_letter_queue_id)
    WHERE dead_letter_queue_id IS NOT NULL;
