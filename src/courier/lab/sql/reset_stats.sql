-- Zero the statistics counters of the current database, so DB_STATS counts from the
-- start of the run. Needs superuser (or a grant); the lab goes on without it.
SELECT pg_stat_reset();
