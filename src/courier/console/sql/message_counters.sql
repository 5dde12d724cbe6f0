-- Cumulative rows ever inserted into and deleted from the messages table (both its
-- partitions, persistent and not), from the table statistics (no scan). The rate
-- sampler turns them into rates.
SELECT coalesce(sum(s.n_tup_ins), 0)::bigint AS inserted,
       coalesce(sum(s.n_tup_del), 0)::bigint AS deleted
FROM pg_partition_tree('courier_messages') t
LEFT JOIN pg_stat_user_tables s ON s.relid = t.relid
WHERE t.isleaf;
