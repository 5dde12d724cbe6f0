-- A keyset page of the stored messages sent by client $1, after id $2: at most $3
-- rows, bodies cut to $4 bytes. The walk follows the (sender_id, id) index
-- (see queue_messages.sql for why it is a row comparison).
WITH walk AS (
    SELECT m.id, m.sender_id
    FROM courier_messages m
    WHERE (m.sender_id, m.id) > ($1, $2)
    ORDER BY m.sender_id, m.id
    LIMIT $3
), chosen AS (
    SELECT id FROM walk WHERE sender_id = $1
)
-- include: _message_rows.sql
