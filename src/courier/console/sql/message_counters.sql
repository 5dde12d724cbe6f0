-- Cumulative rows ever inserted into and deleted from the messages table, from the
-- table statistics (no scan). The rate sampler turns them into rates.
SELECT coalesce(s.n_tup_ins, 0) AS inserted,
       coalesce(s.n_tup_del, 0) AS deleted
FROM (SELECT 'courier_messages'::regclass AS relid) AS t
LEFT JOIN pg_stat_user_tables s ON s.relid = t.relid;
