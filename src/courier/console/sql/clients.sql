-- A keyset page of clients whose name contains $1 (any case; '' matches all), after
-- id $2, at most $3 rows. $4: count cap for the per-client message counts.
WITH chosen AS (
    SELECT c.*, $4::bigint AS count_cap
    FROM courier_clients c
    WHERE c.id > $2
      AND ($1 = '' OR strpos(lower(c.name), lower($1)) > 0)
    ORDER BY c.id
    LIMIT $3
)
-- include: _client_rows.sql
