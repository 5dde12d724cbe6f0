-- Return a database to "no Courier here": drop every courier_* table, sequence, type
-- and function in the current schema (whatever version of the schema, or the mock
-- schema, is there).
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
          AND NOT c.relispartition  -- a partition goes with its table
    LOOP
        EXECUTE format('DROP TABLE IF EXISTS %s CASCADE', r.name);
    END LOOP;
    FOR r IN
        SELECT c.oid::regclass AS name
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = current_schema() AND c.relkind = 'S'
          AND c.relname LIKE 'courier\_%'
    LOOP
        EXECUTE format('DROP SEQUENCE IF EXISTS %s CASCADE', r.name);
    END LOOP;
    FOR r IN
        SELECT t.oid::regtype AS name
        FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
        WHERE n.nspname = current_schema() AND t.typtype = 'c' AND t.typrelid <> 0
          AND t.typname LIKE 'courier\_%'
          AND (SELECT c.relkind FROM pg_class c WHERE c.oid = t.typrelid) = 'c'
    LOOP
        EXECUTE format('DROP TYPE IF EXISTS %s CASCADE', r.name);
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
