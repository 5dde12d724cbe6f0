"""The frames of `courier bench fuzz`: valid requests of every type, and ways to break them.

Pure and quick (a few microseconds a frame): ``valid_bodies`` encodes every request
type once, in several variants, with ``protocol.encode``; a ``FrameMaker`` then
turns that pool into frames of one *kind* each, mostly by changing bytes.

*Keeping* kinds leave the stream in step (the header is rebuilt around the damaged
body), so the server answers each and the connection goes on:

    valid, mutated, truncated, unknown opcode, huge count, invalid text, random body

*Ending* kinds leave no trustworthy frame boundary; the server hangs up after them
(or, when a mangled length asks for more body, once the frame timeout runs out):

    oversized length, unknown version, reply flag, random bytes, mangled header

A *partial* frame is the start of a valid one, for connections that stall.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from courier import models
from courier.protocol import codec, constants, frames
from courier.protocol.constants import Opcode

HEADER = constants.HEADER
U16 = struct.Struct(">H")
U32 = struct.Struct(">I")
I64 = struct.Struct(">q")

CONTROL_IDS = 0xFFFF_FF00
"""Request ids from here up are the bench's own (logging in, the closing PING)."""

VALID = "valid"
MUTATED = "mutated"
TRUNCATED = "truncated"
UNKNOWN_OPCODE = "unknown opcode"
HUGE_COUNT = "huge count"
INVALID_TEXT = "invalid text"
RANDOM_BODY = "random body"
OVERSIZED = "oversized length"
UNKNOWN_VERSION = "unknown version"
REPLY_FLAG = "reply flag"
RANDOM_BYTES = "random bytes"
MANGLED = "mangled header"
PARTIAL = "partial (stall)"

KEEPING_WEIGHTS = {
    VALID: 10,
    MUTATED: 40,
    TRUNCATED: 10,
    UNKNOWN_OPCODE: 8,
    HUGE_COUNT: 8,
    INVALID_TEXT: 12,
    RANDOM_BODY: 12,
}
ENDING_KINDS = (OVERSIZED, UNKNOWN_VERSION, REPLY_FLAG, RANDOM_BYTES, MANGLED)
KINDS = (*KEEPING_WEIGHTS, *ENDING_KINDS, PARTIAL)

KNOWN_OPCODES = tuple(int(opcode) for opcode in Opcode)
UNKNOWN_OPCODES = tuple(code for code in range(256) if code not in KNOWN_OPCODES)
INTERESTING_BYTES = (0x00, 0x01, 0x02, 0x7F, 0x80, 0xFE, 0xFF)
INTERESTING_U16 = (0x0000, 0x0001, 0x7FFF, 0x8000, 0xFFFF)
INTERESTING_U32 = (0x0000_0000, 0x0000_0001, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF)
HUGE_LENGTHS = (0x1000_0000, 0x7FFF_FFFF, 0xFFFF_FFFF)
"""Body lengths past any server's frame limit."""
BAD_TEXT = (
    b"\xff",  # never valid in UTF-8
    b"\x80",  # a continuation byte alone
    b"\xc3\x28",  # a lead byte without its continuation
    b"\xe2\x82",  # a sequence cut short
    b"\xc0\xaf",  # an overlong encoding of "/"
    b"\xed\xa0\x80",  # a UTF-16 surrogate
    b"\xf4\x90\x80\x80",  # past U+10FFFF
    b"\x00",  # valid UTF-8, but not in PostgreSQL text
)
BIG_BODY_CHARS = 70_000
"""A SEND body over the default 64 KiB limit (PAYLOAD_TOO_LARGE), sent rarely."""
BIG_BODY_SHARE = 0.001


@dataclass(frozen=True, slots=True)
class Targets:
    """What the valid frames name: the fuzzers' own queues and clients, never others'."""

    queue_ids: tuple[int, ...]
    client_ids: tuple[int, ...]
    client_names: tuple[str, ...]
    queue_names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Body:
    opcode: int
    body: bytes


def valid_requests(targets: Targets) -> list[frames.Request]:
    """Every request type, in the variants worth mutating."""
    queues, clients = targets.queue_ids, targets.client_ids
    bodies = (b"", b"hi", "é€ and 𝄞".encode(), b"nul\x00\xff", b"x" * 200, b"y" * 1000)
    found: list[frames.Request] = [
        frames.Ping(), frames.Logout(), frames.ListQueues(), frames.QueuesForMe(),
    ]  # fmt: skip
    for name in (*targets.client_names, "Zoë"):
        found += [frames.Register(name, mode) for mode in models.ClientMode]
        found.append(frames.Login(client_id=None, name=name))
    found += [frames.Login(client_id=client, name=None) for client in clients]
    found += [frames.LoginStart(client, None, "nonce") for client in clients]
    found += [frames.LoginProof(bytes(32)), frames.LoginProof(b"")]
    verifier = models.Verifier(bytes(16), 4096, bytes(32), bytes(32))
    found += [frames.SetSecret(client, None, verifier) for client in clients]
    found += [frames.SetClientEnabled(client, None, enabled=True) for client in clients]
    found += [frames.GetClient(client, None) for client in clients]
    found += [frames.GetClient(None, name) for name in targets.client_names]
    for name in targets.queue_names:
        found += [frames.CreateQueue(name), frames.GetQueue(queue_id=None, name=name)]
    for queue in queues:
        found += [frames.DeleteQueue(queue, if_empty=True), frames.GetQueue(queue, None)]
        for order in models.Order:
            found += [
                frames.Read(queue, None, order, pop=True),
                frames.Read(queue, clients[0], order, pop=False),
                frames.Receive(queue, None, order, timeout_ms=5),
            ]
        found.append(frames.AwaitResponse(queue, context=7, timeout_ms=5))
        found += [
            frames.Read(queue, None, models.Order.TIME, pop=True, lease_ms=1000),
            frames.Receive(queue, None, models.Order.PRIORITY, timeout_ms=5, lease_ms=500),
            frames.ConfigureQueue(queue, 3, None, False),
            frames.SetQueueAcl(queue, None, None),
            frames.GetQueueAcl(queue),
            frames.ReceiveMany(queue, None, models.Order.TIME, 20, timeout_ms=5),
            frames.ReceiveMany(queue, None, models.Order.PRIORITY, 5, 0, 500, 2, 5),
        ]
        found += selective_reads(queue)
    found += [
        frames.Ack(1), frames.Nack(2, 100, "fuzz"), frames.Extend(3, 1000), frames.Cancel(1),
    ]  # fmt: skip
    found += [frames.Read(None, None, models.Order.TIME, pop=False)]
    for index, body in enumerate(bodies):
        chosen = queues[index % len(queues) :][:2] or queues[:1]
        for receiver, priority, context in ((None, 5, None), (clients[0], 10, -2), (None, 0, 3)):
            found.append(frames.Send(tuple(chosen), body, receiver, priority, context))
        found.append(frames.Send(tuple(chosen), body, None, 5, None, 10, 60_000, f"fuzz-{index}"))
        found.append(frames.Send(tuple(chosen), body, None, 5, None, properties=TYPED_PROPERTIES))
        drafts = (models.Draft(body), models.Draft(body, clients[0], 9, 4, 10, 60_000, "fuzz"),
                  models.Draft(body, properties=TYPED_PROPERTIES))  # fmt: skip
        found.append(frames.SendMany(tuple(chosen), drafts * (index + 1)))
    found += [frames.AckMany((1, 2, 3)), frames.NackMany((4, 5), 100, "fuzz")]
    return found + topic_requests(targets)


TYPED_PROPERTIES: dict[str, models.PropertyValue] = {
    "kind": "order", "n": -7, "ratio": 0.5, "rush": True, "$ \"@": "'; DROP TABLE x; --",
}  # fmt: skip
"""Properties of every type (revision 4), and a key and a value full of metacharacters."""

SELECTORS = (
    "kind = 'order' AND n < 10",
    "rush OR ratio >= 0.25",
    "n NOT IN (1, 2, 3) AND kind IS NOT NULL",
    "\"$ \"\"@\" = '''; DROP TABLE x; --'",
    "kind = ",  # refused: BAD_SELECTOR
    "n = 1 || $.n == 1",  # refused
    "(" * 20 + "n = 1" + ")" * 20,  # refused: too deep
)
"""Selectors that match, and selectors a server refuses without touching the database."""


def selective_reads(queue: int) -> list[frames.Request]:
    """Reads of one queue with each selector: pop, peek, receive and receive_many."""
    found: list[frames.Request] = []
    for selector in SELECTORS:
        found += [
            frames.Read(queue, None, models.Order.TIME, pop=True, selector=selector),
            frames.Read(queue, None, models.Order.PRIORITY, pop=False, selector=selector),
            frames.Receive(queue, None, models.Order.TIME, timeout_ms=5, selector=selector),
            frames.ReceiveMany(queue, None, models.Order.TIME, 5, timeout_ms=5, selector=selector),
        ]
    return found


def topic_requests(targets: Targets) -> list[frames.Request]:
    """The topic requests, commits and replicated queues, named after the fuzzers' own
    queues."""
    queue = targets.queue_ids[0]
    found: list[frames.Request] = [
        frames.ListTopics(), frames.Unsubscribe(queue),
        frames.Commit(5, (frames.Send((queue,), b"tx", None, 5, None), frames.Ack(1))),
        frames.Commit(0, (frames.Send((queue,), b"tx", None, 7, 2, 10, 60_000, "fuzz-tx"),)),
    ]  # fmt: skip
    for name in targets.queue_names:
        topic = f"{name}-topic"
        found += [
            frames.CreateTopic(topic), frames.GetTopic(None, topic),
            frames.Subscribe(None, topic, "fuzz-fleeting", durable=False),
            frames.Subscribe(None, topic, "fuzz", durable=True),
            frames.Publish(None, topic, b"hi", None, 5, None),
            frames.Publish(None, topic, b"later", None, 9, -1, 10, 60_000, "fuzz"),
            frames.Commit(1, (frames.Publish(None, topic, b"in a tx", None, 5, None),)),
            frames.DeleteTopic(None, topic),
            frames.CreateReplicated(f"{name}-rq", 1), frames.GetReplicated(f"{name}-rq"),
            frames.JoinReplicated(f"{name}-rq", models.Role.PRODUCER),
            frames.JoinReplicated(f"{name}-rq", models.Role.CONSUMER),
            frames.LeaveReplicated(1), frames.DeleteReplicated(f"{name}-rq"),
        ]  # fmt: skip
    return found


def valid_bodies(targets: Targets) -> list[Body]:
    """The pool: each valid request as its opcode and encoded body."""
    encoded = (codec.encode(0, request) for request in valid_requests(targets))
    return [Body(frame[1], frame[constants.HEADER_SIZE :]) for frame in encoded]


def big_send(targets: Targets) -> Body:
    """A SEND whose body is over the default limit: PAYLOAD_TOO_LARGE, not a dropped stream."""
    request = frames.Send(targets.queue_ids[:1], b"z" * BIG_BODY_CHARS, None, 5, None)
    return Body(Opcode.SEND, codec.encode(0, request)[constants.HEADER_SIZE :])


def frame(
    opcode: int, body: bytes, request_id: int, *, flags: int = 0, version: int = constants.VERSION
) -> bytes:
    return HEADER.pack(version, opcode, flags, request_id, len(body)) + body


class FrameMaker:
    """Frames of every kind from one pool of valid bodies and one random generator."""

    def __init__(self, pool: Sequence[Body], big: Body, queue_id: int, rng: random.Random) -> None:
        self.pool = pool
        self.rng = rng
        self._big = big
        # A SEND to one of the fuzzers' queues, up to its body: for hand-made bodies.
        self._send_head = U16.pack(1) + I64.pack(queue_id) + bytes(8) + b"\x05\x00"
        self._keeping = list(KEEPING_WEIGHTS)
        self._weights = list(KEEPING_WEIGHTS.values())
        self._makers = {
            VALID: self.valid, MUTATED: self.mutated, TRUNCATED: self.truncated,
            UNKNOWN_OPCODE: self.unknown_opcode, HUGE_COUNT: self.huge_count,
            INVALID_TEXT: self.invalid_text, RANDOM_BODY: self.random_body,
            OVERSIZED: self.oversized, UNKNOWN_VERSION: self.unknown_version,
            REPLY_FLAG: self.reply_flag, RANDOM_BYTES: self.random_bytes, MANGLED: self.mangled,
        }  # fmt: skip

    def keeping(self) -> tuple[str, bytes]:
        """A frame after which the stream stays in step, and its kind."""
        kind = self.rng.choices(self._keeping, self._weights)[0]
        return kind, self._makers[kind]()

    def ending(self) -> tuple[str, bytes]:
        """A frame after which the server cannot go on reading, and its kind."""
        kind = self.rng.choice(ENDING_KINDS)
        return kind, self._makers[kind]()

    def request_id(self) -> int:
        return self.rng.randrange(CONTROL_IDS)

    def pick(self) -> Body:
        if self.rng.random() < BIG_BODY_SHARE:
            return self._big
        return self.rng.choice(self.pool)

    def flags(self) -> int:
        """Usually 0; sometimes reserved bits, which a server must ignore."""
        return self.rng.getrandbits(16) & ~constants.FLAG_RESPONSE if self.rng.random() < 0.1 else 0

    # -- keeping kinds ---------------------------------------------------------------
    def valid(self) -> bytes:
        chosen = self.pick()
        return frame(chosen.opcode, chosen.body, self.request_id())

    def mutated(self) -> bytes:
        chosen = self.pick()
        body = bytearray(chosen.body)
        for _ in range(self.rng.randint(1, 4)):
            self.mutate(body)
        opcode = self.rng.choice(KNOWN_OPCODES) if self.rng.random() < 0.1 else chosen.opcode
        return frame(opcode, bytes(body), self.request_id(), flags=self.flags())

    def truncated(self) -> bytes:
        chosen = self.pick()
        while not chosen.body:
            chosen = self.pick()
        cut = chosen.body[: self.rng.randrange(len(chosen.body))]
        return frame(chosen.opcode, cut, self.request_id())

    def unknown_opcode(self) -> bytes:
        body = self.pick().body if self.rng.random() < 0.5 else self.rng.randbytes(8)
        return frame(self.rng.choice(UNKNOWN_OPCODES), body, self.request_id())

    def huge_count(self) -> bytes:
        """A count or length far beyond the bytes that follow it."""
        rng = self.rng
        few = rng.randbytes(rng.randrange(0, 24))
        variants = (
            (Opcode.SEND, U16.pack(0xFFFF) + few),  # 65535 queue ids, a few bytes of them
            (Opcode.SEND, U16.pack(0) + bytes(8) + b"\x05\x00" + U32.pack(2) + b"hi"),  # none
            (Opcode.SEND, self._send_head + U32.pack(0xFFFF_FFFF) + few),
            (Opcode.REGISTER, U16.pack(0xFFFF) + few),
            (Opcode.CREATE_QUEUE, U16.pack(rng.choice(INTERESTING_U16)) + few),
            (Opcode.LOGIN, b"\x02" + U16.pack(0xFFFF) + few),
            (Opcode.GET_QUEUE, b"\x02" + U16.pack(0xFFFF) + few),
            (Opcode.GET_CLIENT, b"\x02" + U16.pack(0xFFFF) + few),
        )  # fmt: skip
        opcode, body = rng.choice(variants)
        return frame(opcode, body, self.request_id())

    def invalid_text(self) -> bytes:
        """A name or body holding bytes that are not UTF-8 (or a NUL)."""
        rng = self.rng
        text = b"fuzz" + rng.choice(BAD_TEXT) + b"text"[: rng.randrange(5)]
        name = U16.pack(len(text)) + text
        variants = (
            (Opcode.REGISTER, name + b"\x00"),
            (Opcode.CREATE_QUEUE, name),
            (Opcode.LOGIN, b"\x02" + name),
            (Opcode.GET_QUEUE, b"\x02" + name),
            (Opcode.GET_CLIENT, b"\x02" + name),
            (Opcode.SEND, self._send_head + U32.pack(len(text)) + text),
        )  # fmt: skip
        opcode, body = rng.choice(variants)
        return frame(opcode, body, self.request_id())

    def random_body(self) -> bytes:
        body = self.rng.randbytes(self.rng.randrange(0, 64))
        return frame(self.rng.choice(KNOWN_OPCODES), body, self.request_id())

    # -- ending kinds ----------------------------------------------------------------
    def oversized(self) -> bytes:
        length = self.rng.choice(HUGE_LENGTHS)
        header = HEADER.pack(constants.VERSION, self.pick().opcode, 0, self.request_id(), length)
        return header + self.rng.randbytes(self.rng.randrange(0, 32))

    def unknown_version(self) -> bytes:
        chosen = self.pick()
        version = self.rng.choice([v for v in INTERESTING_BYTES if v != constants.VERSION])
        return frame(chosen.opcode, chosen.body, self.request_id(), version=version)

    def reply_flag(self) -> bytes:
        chosen = self.pick()
        return frame(chosen.opcode, chosen.body, self.request_id(), flags=constants.FLAG_RESPONSE)

    def random_bytes(self) -> bytes:
        return self.rng.randbytes(self.rng.randrange(1, 2048))

    def mangled(self) -> bytes:
        data = bytearray(self.valid())
        for _ in range(self.rng.randint(1, 4)):
            self.mutate(data, within=constants.HEADER_SIZE)
        return bytes(data)

    def partial(self) -> bytes:
        """The start of a valid frame: at least one byte, never all of it."""
        whole = self.valid()
        return whole[: self.rng.randrange(1, len(whole))]

    # -- byte changes ----------------------------------------------------------------
    def mutate(self, data: bytearray, within: int | None = None) -> None:
        """One random change: a bit, a byte, an interesting value, an insertion, a
        deletion or a repeated slice; ``within`` keeps it to the first bytes."""
        rng = self.rng
        if not data:
            data.append(rng.getrandbits(8))
            return
        at = rng.randrange(min(len(data), within or len(data)))
        change = rng.randrange(8)
        if change == 0:
            data[at] ^= 1 << rng.randrange(8)
        elif change == 1:
            data[at] = rng.getrandbits(8)
        elif change == 2:
            data[at] = rng.choice(INTERESTING_BYTES)
        elif change == 3:
            data[at : at + 2] = U16.pack(rng.choice(INTERESTING_U16))
        elif change == 4:
            data[at : at + 4] = U32.pack(rng.choice(INTERESTING_U32))
        elif change == 5:
            data.insert(at, rng.getrandbits(8))
        elif change == 6:
            del data[at : at + rng.randint(1, 4)]
        else:
            data[at:at] = data[at : at + rng.randint(1, 8)]
