"""The client tests' fixtures live in client_fixtures (shared with the CLI tests)."""

from integration.client.client_fixtures import (  # noqa: F401 (fixtures)
    connect,
    module_dsn,
    servers,
    start_server,
    unique,
)
