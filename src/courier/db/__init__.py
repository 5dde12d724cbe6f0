"""The database tier: schema, embedded server lifecycle and the repository."""
