-- Migration 0035: deleting a queue plans its statements once.
-- The whole current schema, documented, is schema.sql.
--
-- courier_exchange_v7 and courier_delete_queue_v1 ran with the default plan cache
-- mode, and for their statements on courier_messages (a partitioned table) the
-- planner always judged a custom plan cheaper than the generic one. So every delete
-- of a queue planned afresh the batch's check for a long queue, the function's check
-- for an empty one, and the cascade that deletes the queue's messages (a foreign
-- key's query runs under the settings of the function whose statement fired it).
-- In the lab's standard cycle, which deletes a queue per cycle, that planning was
-- about 15% of the database's CPU: 220 µs a delete, against 10 µs to run the same
-- statements. Their generic plans walk the same indexes. Same signatures, same
-- answers.
ALTER FUNCTION courier_exchange_v7(
    integer[], bigint[], bytea[], bigint[], integer[], bigint[], boolean[], integer[], bigint[],
    integer, integer[], bigint[], text[], bigint[], integer[], bigint[], bigint[], bigint[],
    text[], boolean[], integer[], bigint[], integer[], bigint[], bigint[],
    courier_option_send_v3[], integer, courier_send_group_v3[], courier_pop_group_v1[],
    integer[], text[], bigint[], integer[], integer[], bigint[], integer, integer[], bigint[],
    bigint[], boolean[])
    SET plan_cache_mode = force_generic_plan;

ALTER FUNCTION courier_delete_queue_v1(bigint, boolean) SET plan_cache_mode = force_generic_plan;
