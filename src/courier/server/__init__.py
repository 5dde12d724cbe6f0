"""The middleware tier: `courier serve`, a stateless asyncio server over PostgreSQL.

app         one instance assembled; ``run(settings)`` serves until a stop signal
launcher    starts `courier serve` as a child process, ready when it answers a PING
listener    accepts connections up to max_clients
connection  per-connection read loop, pipelined requests, ordered writes
session     which client a connection is logged in as
handlers    one handler per opcode, and the opcode -> handler table; LOGIN and
            LOGOUT return the session they leave (SessionChange)
backend     the handler -> storage boundary (repository method set), outage rules;
            `--mock` swaps in courier.db.mock.MockBackend
waiters     RECEIVE / AWAIT_RESPONSE wait here for a message, without polling
notify      the LISTEN connection that wakes waiters
registry    this instance's registration and heartbeat; expires dead instances
measurement_hook  the per-request measurement hook
"""
