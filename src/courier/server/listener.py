"""Accept connections within the instance's capacity; stop them all on shutdown.

Every connection is accepted, as one that has not logged in. Beyond
``max_anonymous`` of those, the oldest is told SERVER_FULL (request id 0) and
closed to make room; a LOGIN beyond ``max_clients`` logged-in connections is
answered SERVER_FULL (see ``admission``). The clients logged in notice nothing.
Given an SSL context, the listener speaks TLS only (see ``tls_gate``).
"""

from __future__ import annotations

import asyncio
import logging
import ssl

from courier import errors, protocol
from courier.server import admission, connection, handlers, metrics, tls_gate

log = logging.getLogger(__name__)


class Listener:
    def __init__(
        self,
        settings: connection.ConnectionSettings,
        max_clients: int,
        max_anonymous: int,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self._services: handlers.Services | None = None
        self._tls = tls
        self._settings = settings
        self._places: admission.Admission[connection.Connection] = admission.Admission(
            max_clients, max_anonymous
        )
        self._connections: dict[connection.Connection, asyncio.Task[None]] = {}
        self._server: asyncio.Server | None = None
        self._gate: tls_gate.TlsGate | None = None  # instead of _server when serving TLS

    def __len__(self) -> int:
        return len(self._connections)

    def watch(self, found: metrics.Metrics) -> None:
        """Let the metrics count the connections open and logged in when scraped."""
        places = self._places
        found.watch_connections(lambda: len(self._connections), lambda: places.logged_in)

    def serves(self, client_id: int) -> bool:
        """Whether a connection here is logged in as this client."""
        return client_id in self.logged_in_clients()

    def logged_in_clients(self) -> set[int]:
        """The ids of the clients logged in here."""
        return {
            conn.session.client.id for conn in self._connections if conn.session.client is not None
        }

    def end_sessions_of(self, client_id: int) -> None:
        """The client was disabled: close every connection logged in as it."""
        for conn in list(self._connections):
            if conn.session.client is not None and conn.session.client.id == client_id:
                log.info("client %d was disabled; closing its connection", client_id)
                conn.stop(graceful=False)

    async def bind(self, host: str, port: int) -> tuple[str, int]:
        """Open the listening socket (not yet accepting); returns the bound address."""
        if self._tls is not None:
            self._gate = tls_gate.TlsGate(self._tls, self._settings.frame_timeout, self._link)
            return self._gate.bind(host, port)
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._link, host, port, start_serving=False)
        bound = self._server.sockets[0].getsockname()
        return str(bound[0]), int(bound[1])

    async def start(self, services: handlers.Services) -> None:
        """Start accepting; connections use ``services`` from now on."""
        self._services = services
        if self._gate is not None:
            self._gate.start()
            return
        assert self._server is not None, "bind first"
        await self._server.start_serving()

    def stop_accepting(self) -> None:
        if self._gate is not None:
            self._gate.close()
        if self._server is not None:
            self._server.close()

    async def stop_connections(self, grace: float) -> None:
        """Stop reading on every connection, let running requests finish, then close."""
        for conn in list(self._connections):
            conn.stop()
        pending = list(self._connections.values())
        if not pending:
            return
        _, late = await asyncio.wait(pending, timeout=grace)
        for task in late:
            task.cancel()
        if late:
            log.warning("%d connections did not finish within %.1fs", len(late), grace)
            await asyncio.wait(late)

    async def reclaim_sessions(self, old_instance_id: int, new_instance_id: int) -> None:
        """Move this instance's sessions to its new registry id; a client that lost its
        session meanwhile (someone logged in as it elsewhere) is disconnected."""
        assert self._services is not None
        store = self._services.backend
        for conn in list(self._connections):
            client = conn.session.client
            if client is None:
                continue
            try:
                await store.logout(client.id, old_instance_id)
                await store.login(client.id, new_instance_id)
            except errors.CourierError as exc:
                log.warning("client %d lost its session (%s); disconnecting", client.id, exc)
                conn.stop(graceful=False)

    def _link(self) -> connection.Link:
        return connection.Link(self._opened)

    def _opened(self, link: connection.Link, transport: asyncio.Transport) -> None:
        """A peer connected: serve it in a task of its own, or refuse it if this
        listener does not serve yet."""
        if self._services is None:
            refuse(transport)
            return
        conn = connection.Connection(link, transport, self._services, self._settings,
                                     self._places)  # fmt: skip
        self._connections[conn] = asyncio.get_running_loop().create_task(self._serve(conn))
        pushed_out = self._places.arrive(conn)
        if pushed_out is not None:
            pushed_out.push_out()

    async def _serve(self, conn: connection.Connection) -> None:
        try:
            await conn.serve()
        except Exception:
            log.exception("connection from %s failed", conn.peer)
        finally:
            del self._connections[conn]
            self._places.leave(conn)


def refuse(transport: asyncio.Transport) -> None:
    """Tell a client the server is not serving yet, and hang up."""
    full = protocol.ErrorReply(errors.Status.SERVER_FULL, errors.ServerFull().message)
    transport.write(protocol.encode(0, full))
    transport.close()
