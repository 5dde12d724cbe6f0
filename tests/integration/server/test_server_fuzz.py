"""Hypothesis against a real `courier serve`: whatever bytes a connection sends, the
server answers in well-formed reply frames (or hangs up), and a well-behaved client
on another connection goes on sending and receiving without noticing.

Each example is one connection: its bytes (random, hand-built headers, or valid
frames with changed bytes, some after a REGISTER + LOGIN so the body parsers run
past the login check), then end of stream; the server answers and closes.
"""

from __future__ import annotations

import itertools
import socket
import struct
from collections.abc import AsyncIterator, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from courier import errors, models, protocol
from courier.bench import fuzzclients
from courier.client import Client
from courier.protocol import frames
from helpers.servers import ServerProcess, address, starting_servers

FUZZ_QUEUE = 2**33 + 5  # the valid frames name ids nobody has, so they change nothing
FUZZ_CLIENT = 2**33 + 9
VALID_REQUESTS: list[frames.Request] = [
    frames.Ping(),
    frames.Register("fuzz-zoë", models.ClientMode.READ_ONLY),
    frames.Login(client_id=FUZZ_CLIENT, name=None),
    frames.Login(client_id=None, name="fuzz-nobody"),
    frames.Logout(),
    frames.CreateQueue("fuzz-queue"),
    frames.DeleteQueue(FUZZ_QUEUE, if_empty=True),
    frames.GetQueue(queue_id=None, name="fuzz-queue"),
    frames.GetClient(client_id=None, name="fuzz-nobody"),
    frames.GetClient(client_id=FUZZ_CLIENT, name=None),
    frames.ListQueues(),
    frames.Send((FUZZ_QUEUE, FUZZ_QUEUE + 1), "héllo".encode(), FUZZ_CLIENT, 5, -3),
    frames.Send((FUZZ_QUEUE,), b"\x00\xff", None, 5, None, 10, 1000, "fuzz"),
    frames.Read(FUZZ_QUEUE, None, models.Order.TIME, pop=True, lease_ms=1000),
    frames.Ack(1),
    frames.Nack(1, 10, "why"),
    frames.Extend(1, 1000),
    frames.Cancel(1),
    frames.ConfigureQueue(FUZZ_QUEUE, 2, FUZZ_QUEUE + 1, True),
    frames.Read(FUZZ_QUEUE, None, models.Order.PRIORITY, pop=True),
    frames.Receive(FUZZ_QUEUE, FUZZ_CLIENT, models.Order.TIME, timeout_ms=1),
    frames.AwaitResponse(FUZZ_QUEUE, context=7, timeout_ms=1),
    frames.QueuesForMe(),
]
VALID_FRAMES = [protocol.encode(n, request) for n, request in enumerate(VALID_REQUESTS, 1)]
HEADER = protocol.constants.HEADER
names = itertools.count()


@st.composite
def mutated_frames(draw: st.DrawFn) -> bytes:
    """A valid frame with a few bytes changed; usually its length still fits its body."""
    data = bytearray(draw(st.sampled_from(VALID_FRAMES)))
    for _ in range(draw(st.integers(1, 4))):
        data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        struct.pack_into(">BI", data, 0, protocol.VERSION, 0)  # version 1, flags
        struct.pack_into(">I", data, 8, len(data) - protocol.HEADER_SIZE)
    return bytes(data)


headers = st.builds(
    lambda version, opcode, flags, request_id, body: (
        HEADER.pack(version, opcode, flags, request_id, len(body)) + body
    ),
    st.sampled_from([1, 1, 1, 0, 2, 255]),
    st.integers(0, 255),
    st.integers(0, 0xFFFF),
    st.integers(0, 0xFFFF_FFFF),
    st.binary(max_size=48),
)
one_frame = st.one_of(st.sampled_from(VALID_FRAMES), mutated_frames(), headers)
streams = st.one_of(
    st.lists(one_frame, min_size=1, max_size=16).map(b"".join),
    st.binary(min_size=1, max_size=4096),
    st.lists(one_frame, min_size=1, max_size=8)
    .map(b"".join)
    .flatmap(
        lambda whole: st.integers(1, len(whole)).map(lambda end: whole[:end])  # cut short
    ),
)


class GoodClient:
    """Sends messages to itself through the server and takes each back."""

    def __init__(self, server: ServerProcess) -> None:
        name = f"fuzz-good-{next(names)}"
        self.client = Client.connect(address(server))
        self.client.register(name, secret=name)
        self.me = self.client.login(name=name, secret=name).id
        self.queue = self.client.create_queue(name).id
        self.sent = 0

    def round_trip(self) -> None:
        self.sent += 1
        body = f"good {self.sent}".encode()
        self.client.send(self.queue, body, receiver=self.me)
        found = []
        while (message := self.client.pop(self.queue)) is not None:
            found.append(message.body)  # a fuzzed SEND may have slipped one in: skip it
            if message.body == body:
                return
        raise AssertionError(f"{body!r} never came back; found {found}")

    @property
    def guard(self) -> fuzzclients.Guard:
        return fuzzclients.Guard.protecting([self.queue], [self.me])


@pytest.fixture(scope="module")
async def servers(
    module_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[list[ServerProcess]]:
    """The fuzz frames log in openly (by name, as fuzz clients of the lab do)."""
    async with starting_servers(module_dsn, tmp_path_factory.mktemp("servers")) as start:
        yield [await start(open_login=True)]


@pytest.fixture(scope="module")
def good(servers: list[ServerProcess]) -> Iterator[GoodClient]:
    client = GoodClient(servers[0])
    yield client
    client.client.close()


def exchange(server: ServerProcess, data: bytes) -> tuple[bytes, bool]:
    """Send ``data``, end the stream, read until the server closes; (replies, reset)."""
    received = bytearray()
    with socket.create_connection(server.address, timeout=10) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            while chunk := sock.recv(65536):
                received += chunk
        except ConnectionResetError:  # it hung up while we still sent: replies may be lost
            return bytes(received), True
    return bytes(received), False


def log_in_first(data: bytes) -> bytes:
    name = f"fuzz-login-{next(names)}"
    register = protocol.encode(1, frames.Register(name, models.ClientMode.READ_WRITE))
    return register + protocol.encode(2, frames.Login(client_id=None, name=name)) + data


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(data=streams, logged_in=st.booleans())
def test_any_bytes_get_well_formed_replies_and_harm_no_one(
    servers: list[ServerProcess], good: GoodClient, data: bytes, logged_in: bool
) -> None:
    server = servers[0]
    stream = log_in_first(data) if logged_in else data
    if good.guard.hits(stream):
        return  # never delete the good client's queue or log in as it
    received, reset = exchange(server, stream)
    decoder = protocol.Decoder(64 * 1024 * 1024)
    for raw in decoder.feed(received):
        assert raw.is_response, raw
        try:
            protocol.parse(raw)
        except errors.ProtocolError as exc:
            raise AssertionError(f"malformed reply {raw!r} to {stream.hex()}") from exc
    assert reset or decoder.buffered == 0, "a reply was cut short"
    assert server.process is not None and server.process.poll() is None
    good.round_trip()
