-- Bookkeeping of the migrator: one row per applied file in migrations/.
CREATE TABLE IF NOT EXISTS courier_migrations (
    name       text PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
);
