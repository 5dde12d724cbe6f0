-- Return a database to "no Courier here": drop every courier_* table and function in
-- the current schema (whatever version of the schema, or the mock schema, is there).
-- The lab runs this before each run; other objects in the database are left alone.
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT c.oid::regclass AS name
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')
          AND c.relname LIKE 'courier\_%'
    LOOP
        EXECUTE format('DROP TABLE IF EXISTS %s CASCADE', r.name);
    END LOOP;
    FOR r IN
        SELECT p.oid::regprocedure AS name
        FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = current_schema() AND p.proname LIKE 'courier\_%'
    LOOP
        EXECUTE format('DROP FUNCTION IF EXISTS %s CASCADE', r.name);
    END LOOP;
END;
$$;
