"""The frames of `courier bench fuzz`: each kind breaks what it says, and no more."""

from __future__ import annotations

import random

import pytest

from courier import errors, protocol
from courier.bench import fuzzclients, fuzzframes
from courier.protocol import frames

TARGETS = fuzzframes.Targets(
    queue_ids=(11, 12, 2**40 + 7), client_ids=(21, 22), client_names=("fuzz-a", "fuzz-b"),
    queue_names=("fq-a", "fq-new"),
)  # fmt: skip


@pytest.fixture
def maker() -> fuzzframes.FrameMaker:
    pool = fuzzframes.valid_bodies(TARGETS)
    return fuzzframes.FrameMaker(pool, fuzzframes.big_send(TARGETS), 11, random.Random(5))


def cut(data: bytes) -> tuple[list[frames.RawFrame], protocol.Decoder]:
    decoder = protocol.Decoder(protocol.frame_limit_for(64 * 1024))
    return decoder.feed(data), decoder


def parses(raw: frames.RawFrame) -> bool:
    try:
        protocol.parse(raw)
    except errors.ProtocolError:
        return False
    return True


def test_the_pool_holds_every_request_type() -> None:
    opcodes = {body.opcode for body in fuzzframes.valid_bodies(TARGETS)}
    assert opcodes == set(protocol.Opcode)


def test_keeping_frames_keep_the_stream_in_step(maker: fuzzframes.FrameMaker) -> None:
    made = [maker.keeping() for _ in range(5000)]
    raws, decoder = cut(b"".join(frame for _, frame in made))
    assert len(raws) == len(made) and decoder.buffered == 0
    assert {kind for kind, _ in made} == set(fuzzframes.KEEPING_WEIGHTS)
    for (kind, frame), raw in zip(made, raws, strict=True):
        assert raw.size == len(frame) and not raw.is_response
        assert raw.request_id < fuzzframes.CONTROL_IDS
        if kind == fuzzframes.VALID:
            assert parses(raw)
        elif kind in (fuzzframes.TRUNCATED, fuzzframes.UNKNOWN_OPCODE):
            assert not parses(raw), (kind, frame.hex())
        elif kind == fuzzframes.INVALID_TEXT:
            assert not parses(raw) or b"\x00" in raw.body, frame.hex()


def test_mutated_frames_mostly_fail_and_sometimes_pass(maker: fuzzframes.FrameMaker) -> None:
    raws, _ = cut(b"".join(maker.mutated() for _ in range(2000)))
    passing = sum(parses(raw) for raw in raws)
    assert 0.05 * len(raws) < passing < 0.6 * len(raws)


@pytest.mark.parametrize(
    ("make", "error"),
    [("oversized", protocol.FrameTooLarge), ("unknown_version", protocol.UnsupportedVersion)],
)
def test_ending_frames_break_the_framing(
    maker: fuzzframes.FrameMaker, make: str, error: type[Exception]
) -> None:
    for _ in range(50):
        with pytest.raises(error):
            cut(getattr(maker, make)())


def test_reply_flag_frames_are_whole_replies(maker: fuzzframes.FrameMaker) -> None:
    raws, _ = cut(maker.reply_flag())
    assert len(raws) == 1 and raws[0].is_response


def test_partial_frames_are_never_whole(maker: fuzzframes.FrameMaker) -> None:
    for _ in range(500):
        data = maker.partial()
        raws, decoder = cut(data)
        assert raws == [] and decoder.buffered == len(data) > 0


def test_a_mutation_within_the_header_leaves_the_body_alone(
    maker: fuzzframes.FrameMaker,
) -> None:
    original = bytes(range(40))
    changed = 0
    for _ in range(500):
        data = bytearray(original)
        maker.mutate(data, within=4)  # touches at most 8 bytes from a start below 4
        assert bytes(data).endswith(original[12:])
        changed += data != original
    assert changed > 400


def test_the_guard_blocks_deleting_and_logging_in_as_the_good_clients() -> None:
    guard = fuzzclients.Guard.protecting(queue_ids=[7], client_ids=[9])
    assert guard.hits(protocol.encode(1, frames.DeleteQueue(7, if_empty=False)))
    assert guard.hits(protocol.encode(1, frames.Login(client_id=9, name=None)))
    assert not guard.hits(protocol.encode(1, frames.DeleteQueue(8, if_empty=False)))
    assert not guard.hits(protocol.encode(1, frames.Login(client_id=7, name=None)))
    # Reaching the good queue otherwise is allowed: the good client counts strangers.
    assert not guard.hits(protocol.encode(1, frames.Send((7,), b"x", None, 5, None)))


def test_the_tally_hands_out_its_budget_once() -> None:
    tally = fuzzclients.Tally(budget=10)
    assert [tally.take(4), tally.take(4), tally.take(4), tally.take(4)] == [4, 4, 2, 0]


@pytest.mark.parametrize("slot", range(16))
def test_every_eighth_connection_stalls(slot: int) -> None:
    role = fuzzclients.role_of(slot)
    assert (role == fuzzclients.STALLER) == (slot % 8 == 7)


def test_the_pool_holds_selective_reads_and_typed_properties() -> None:
    requests = fuzzframes.valid_requests(TARGETS)
    selectors = {getattr(request, "selector", None) for request in requests} - {None}
    assert selectors == set(fuzzframes.SELECTORS)
    drafts = [d for r in requests if isinstance(r, frames.SendMany) for d in r.messages]
    values = [v for r in [*requests, *drafts] for v in getattr(r, "properties", {}).values()]
    assert {type(value) for value in values} == {str, int, float, bool}
