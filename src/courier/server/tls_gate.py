"""The door of a TLS middleware: accept, look at the first byte, then shake hands.

asyncio's own TLS server drops a peer that speaks plaintext without a word, so a
plaintext Courier client would only learn that the connection closed. The gate
peeks (without consuming) at the first byte a peer sends: a TLS handshake record
goes on to the handshake; anything else gets a TLS alert record, which the
Courier client recognises and reports as "this server speaks TLS". A failed
handshake costs that peer its connection and nobody else anything. A connection that
shook hands is served by a protocol the listener makes (``connection.Link``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Callable

log = logging.getLogger(__name__)

HANDSHAKE_RECORD = 0x16
"""The first byte of a TLS ClientHello; a Courier frame starts with its version, 1."""
PLAINTEXT_ALERT = bytes([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x46])
"""A fatal TLS alert (protocol_version): the answer to a plaintext greeting."""
BACKLOG = 1024
READ_BEFORE_CLOSING = 64 * 1024

ProtocolFactory = Callable[[], asyncio.BaseProtocol]


class TlsGate:
    """Accepts on its own listening socket and serves each TLS connection with a
    protocol from ``protocols``."""

    def __init__(
        self, context: ssl.SSLContext, handshake_timeout: float, protocols: ProtocolFactory
    ) -> None:
        self._context = context
        self._timeout = handshake_timeout
        self._protocols = protocols
        self._socket: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._greetings: set[asyncio.Task[None]] = set()

    def bind(self, host: str, port: int) -> tuple[str, int]:
        """Open the listening socket (not yet accepting); returns the bound address."""
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        self._socket = socket.create_server((host, port), family=family, backlog=BACKLOG)
        self._socket.setblocking(False)
        bound = self._socket.getsockname()
        return str(bound[0]), int(bound[1])

    def start(self) -> None:
        assert self._socket is not None, "bind first"
        self._accepting = asyncio.get_running_loop().create_task(self._accept_loop(self._socket))

    def close(self) -> None:
        """Stop accepting; peers still at the door are turned away."""
        if self._accepting is not None:
            self._accepting.cancel()
        for greeting in list(self._greetings):
            greeting.cancel()
        if self._socket is not None:
            self._socket.close()

    async def _accept_loop(self, listening: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                peer, _ = await loop.sock_accept(listening)
            except OSError as exc:  # out of file descriptors, say: keep the door open
                log.warning("accept failed: %s", exc)
                await asyncio.sleep(0.1)
                continue
            greeting = loop.create_task(self._greet(peer))
            self._greetings.add(greeting)
            greeting.add_done_callback(self._greetings.discard)

    async def _greet(self, peer: socket.socket) -> None:
        peer.setblocking(False)
        if not await self._open(peer, _name(peer)):
            peer.close()

    async def _open(self, peer: socket.socket, address: str) -> bool:
        """Whether the peer shook hands: its connection is then served by a protocol
        of its own."""
        try:
            first = await _peek(peer, self._timeout)
        except (TimeoutError, OSError):
            return False
        if not first:
            return False
        if first[0] != HANDSHAKE_RECORD:
            log.info("refused a plaintext connection from %s: this port speaks TLS", address)
            _turn_away(peer)
            return False
        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                self._protocols, peer, ssl=self._context, ssl_handshake_timeout=self._timeout
            )
        except (ssl.SSLError, OSError, TimeoutError) as exc:
            log.info("TLS handshake with %s failed: %s", address, str(exc) or repr(exc))
            return False
        return True


async def _peek(peer: socket.socket, timeout: float) -> bytes:
    """The first byte the peer sent, left in place for the handshake to read."""
    loop = asyncio.get_running_loop()
    readable: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not readable.done():
            readable.set_result(None)

    loop.add_reader(peer.fileno(), wake)
    try:
        async with asyncio.timeout(timeout):
            await readable
    finally:
        loop.remove_reader(peer.fileno())
    return peer.recv(1, socket.MSG_PEEK)


def _turn_away(peer: socket.socket) -> None:
    """Answer a plaintext greeting with a TLS alert, and hang up gently: what the
    peer sent is read first, since closing on unread bytes resets the connection,
    and a reset may discard the alert before the peer reads it."""
    with contextlib.suppress(OSError):
        peer.recv(READ_BEFORE_CLOSING)
        peer.send(PLAINTEXT_ALERT)
        peer.shutdown(socket.SHUT_WR)


def _name(peer: socket.socket) -> str:
    try:
        host, port = peer.getpeername()[:2]
    except OSError:
        return "?"
    return f"{host}:{port}"
