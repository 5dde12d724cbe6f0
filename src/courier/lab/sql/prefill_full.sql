-- The `full` dataset in one statement: $1 senders named $6-00, $6-01, ... are
-- registered, then $2 messages of
-- $3 characters are spread round-robin over the queues $4, from the senders in turn.
-- In every queue every second block of messages is addressed, round-robin, to one
-- of the clients $5 (the run's own clients), so half of all messages are addressed.
-- Priorities cycle through 1..10. Returns the number of messages stored.
WITH senders AS (
    INSERT INTO courier_clients (name, mode)
    SELECT format('%s-%s', $6::text, lpad(n::text, 2, '0')), 'read_write'
    FROM generate_series(1, $1::integer) AS n
    RETURNING id
), sender_ids AS (
    SELECT array_agg(id ORDER BY id) AS ids FROM senders
), numbered AS (
    SELECT i, cardinality($4::bigint[]) AS queues, cardinality($5::bigint[]) AS receivers
    FROM generate_series(0, $2::integer - 1) AS i
), stored AS (
    INSERT INTO courier_messages (queue_id, sender_id, receiver_id, priority, body)
    SELECT ($4::bigint[])[1 + n.i % n.queues],
           s.ids[1 + (n.i + n.i / n.queues) % cardinality(s.ids)],
           CASE WHEN (n.i / n.queues) % 2 = 1 AND n.receivers > 0
                THEN ($5::bigint[])[1 + (n.i / (2 * n.queues)) % n.receivers] END,
           1 + (n.i / 3) % 10,
           convert_to(repeat('d', $3::integer), 'UTF8')
    FROM numbered n, sender_ids s
    RETURNING 1
)
SELECT count(*) FROM stored;
