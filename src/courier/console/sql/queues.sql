-- A keyset page of queues whose name contains $1 (any case; '' matches all), after
-- id $2, at most $3 rows. $4: count cap.
WITH chosen AS (
    SELECT q.*, $4::bigint AS count_cap
    FROM courier_queues q
    WHERE q.id > $2
      AND ($1 = '' OR strpos(lower(q.name), lower($1)) > 0)
    ORDER BY q.id
    LIMIT $3
)
-- include: _queue_rows.sql
