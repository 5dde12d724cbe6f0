-- One DB_STATS sample: size of the current database and its transaction counters
-- since the last statistics reset.
SELECT pg_database_size(current_database()) AS db_size_bytes,
       coalesce(d.xact_commit, 0) AS xact_commit,
       coalesce(d.xact_rollback, 0) AS xact_rollback
FROM pg_stat_database d
WHERE d.datname = current_database();
