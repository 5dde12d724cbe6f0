-- The queues whose dead letters go to queue $1, in id order. Queues are few; the
-- messages table is not read.
SELECT q.id, q.name
FROM courier_queues q
WHERE q.dead_letter_queue_id = $1
ORDER BY q.id;
