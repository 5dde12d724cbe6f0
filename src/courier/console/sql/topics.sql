-- A keyset page of topics after id $1, at most $2 topics, each with its
-- subscriptions: one row per subscription (a topic without any is one row whose
-- subscription columns are NULL), ordered by topic, then queue. Each subscription's
-- visible messages (backlog) and held ones, leased or delayed, are counted up to
-- $3 + 1 (the count cap).
WITH chosen AS (
    SELECT t.id, t.name FROM courier_topics t WHERE t.id > $1 ORDER BY t.id LIMIT $2
)
SELECT t.id AS topic,
       t.name AS topic_name,
       s.queue_id AS queue,
       q.name AS queue_name,
       s.name AS subscription,
       CASE WHEN s.queue_id IS NULL THEN NULL
            WHEN s.durable THEN 'durable' ELSE 'non-durable' END AS kind,
       s.subscriber_id AS subscriber,
       c.name AS subscriber_name,
       CASE WHEN s.queue_id IS NOT NULL THEN
           (SELECT count(*) FROM (SELECT 1 FROM courier_messages m
                                  WHERE m.queue_id = s.queue_id LIMIT $3 + 1) AS n)
       END AS backlog,
       CASE WHEN s.queue_id IS NOT NULL THEN
           (SELECT count(*) FROM (SELECT 1 FROM courier_held_messages h
                                  WHERE h.queue_id = s.queue_id LIMIT $3 + 1) AS n)
       END AS held
FROM chosen t
LEFT JOIN courier_subscriptions s ON s.topic_id = t.id
LEFT JOIN courier_queues q ON q.id = s.queue_id
LEFT JOIN courier_clients c ON c.id = s.subscriber_id
ORDER BY t.id, s.queue_id;
