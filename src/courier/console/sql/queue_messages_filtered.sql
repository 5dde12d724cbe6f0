-- Like queue_messages.sql, filtered by sender $5, receiver $6 (0: messages for
-- anyone) and priority $7 (NULL turns a filter off). Only the next $8 index entries
-- after (queue $1, id $2) are examined, so a filter that matches little still costs
-- a bounded walk (the index carries the filtered columns); names and bodies are
-- fetched for the matches alone.
WITH examined AS (
    SELECT m.id, m.queue_id, m.sender_id, m.receiver_id, m.priority
    FROM courier_messages m
    WHERE (m.queue_id, m.id) > ($1, $2)
    ORDER BY m.queue_id, m.id
    LIMIT $8
), chosen AS (
    SELECT e.id FROM examined e
    WHERE e.queue_id = $1
      AND ($5::bigint IS NULL OR e.sender_id = $5)
      AND ($6::bigint IS NULL OR coalesce(e.receiver_id, 0) = $6)
      AND ($7::int IS NULL OR e.priority = $7)
    ORDER BY e.id
    LIMIT $3
)
-- include: _message_rows.sql
