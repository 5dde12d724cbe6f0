-- Migration 0031: the lists that count each queue's messages read them by index.
-- The whole current schema, documented, is schema.sql.
--
-- Listing the queues, the queues with messages for a reader, and the topics with
-- their backlogs count each queue's messages (up to a cap) in a lateral subquery.
-- Its plan is made for any queue at once, so the planner estimates a queue's share
-- of the messages from the number of distinct queues. When most messages sit in a
-- few queues (one queue with a backlog is enough), it takes every queue to hold
-- thousands, and a scan of the whole message table, stopped at the cap, to look
-- cheaper than an index walk: each listed queue then read the whole table. With
-- 35,000 messages in one queue of 66, QUEUES_FOR_ME took 258 ms instead of 1 ms.
-- These three functions now run with sequential scans discouraged, so each count is
-- an index walk of its own queue whatever the table holds.
ALTER FUNCTION courier_list_queues_v2(integer) SET enable_seqscan = off;
ALTER FUNCTION courier_queues_for_me_v2(bigint, integer) SET enable_seqscan = off;
ALTER FUNCTION courier_topics_v1(bigint, text, integer) SET enable_seqscan = off;
