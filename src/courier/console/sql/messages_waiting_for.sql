-- A keyset page of the stored messages addressed to client $1 (receiver = $1),
-- after id $2: at most $3 rows, bodies cut to $4 bytes. The walk follows the
-- partial (receiver_id, id) index (see queue_messages.sql for the row comparison).
WITH walk AS (
    SELECT m.id, m.receiver_id
    FROM courier_messages m
    WHERE (m.receiver_id, m.id) > ($1, $2) AND m.receiver_id IS NOT NULL
    ORDER BY m.receiver_id, m.id
    LIMIT $3
), chosen AS (
    SELECT id FROM walk WHERE receiver_id = $1
)
-- include: _message_rows.sql
