-- How far a filtered page's walk reached: of the next $3 index entries after
-- (queue $1, id $2), how many belong to the queue and the last one's id. Fewer than
-- $3 means the walk reached the end of the queue.
WITH examined AS (
    SELECT m.id, m.queue_id
    FROM courier_messages m
    WHERE (m.queue_id, m.id) > ($1, $2)
    ORDER BY m.queue_id, m.id
    LIMIT $3
)
SELECT count(*) AS scanned, max(id) AS last_id
FROM examined
WHERE queue_id = $1;
