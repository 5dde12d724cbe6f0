-- One client by id ($1). $2: count cap for its message counts.
WITH chosen AS (
    SELECT c.*, $2::bigint AS count_cap FROM courier_clients c WHERE c.id = $1
)
-- include: _client_rows.sql
