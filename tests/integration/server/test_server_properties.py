"""Properties on the wire through a real server: sent with SEND and SEND_MANY, read
back by READ and RECEIVE_MANY, and a frame whose properties break the limits
refused as BAD_REQUEST with the connection kept and nothing stored."""

from __future__ import annotations

from server_harness import Connect, log_in_new, raw_frame

from courier import models, protocol
from courier.errors import Status
from courier.protocol import frames
from helpers.servers import ServerProcess


def entry(key: bytes, value: bytes) -> bytes:
    """A text property: key, tag t (text), value."""
    return len(key).to_bytes(2, "big") + key + b"t" + len(value).to_bytes(2, "big") + value


async def test_properties_travel_on_the_wire_and_bad_ones_are_refused(
    server: ServerProcess, connect: Connect
) -> None:
    client = await connect(server)
    await log_in_new(client, "props-on-the-wire")
    queue = (await client.ok(frames.CreateQueue("props"))).queue  # type: ignore[union-attr]

    # A SEND whose one key is given twice: malformed, answered on its own id.
    plain = protocol.encode(1, frames.Send((queue.id,), b"x", None, 5, None))
    twice = b"\x00\x02" + entry(b"k", b"a") + entry(b"k", b"b")
    body = plain[protocol.HEADER_SIZE : -3] + twice + b"\x01"  # then persistent
    client.send_raw(raw_frame(protocol.Opcode.SEND, 77, body))
    raw, reply = await client.next_unsolicited()
    assert (raw.request_id, raw.opcode) == (77, protocol.Opcode.SEND)
    assert isinstance(reply, frames.ErrorReply) and reply.status == Status.BAD_REQUEST
    assert "given twice" in reply.message

    await client.ok(frames.Send((queue.id,), b"one", None, 5, None, properties={"k": "1"}))
    drafts = (models.Draft(b"two", properties={"k": "2"}), models.Draft(b"three"))
    await client.ok(frames.SendMany((queue.id,), drafts))
    read = await client.ok(frames.Read(queue.id, None, models.Order.TIME, pop=True))
    assert isinstance(read, frames.MessageReply)
    assert (read.message.body, read.message.properties) == (b"one", {"k": "1"})
    many = await client.ok(frames.ReceiveMany(queue.id, None, models.Order.TIME, 10))
    assert isinstance(many, frames.MessagesReply)
    assert [(m.body, m.properties) for m in many.messages] == [
        (b"two", {"k": "2"}), (b"three", {}),
    ]  # fmt: skip  # the refused SEND stored nothing


async def test_the_largest_properties_fit_a_send_and_count_towards_a_batch(
    server: ServerProcess, connect: Connect
) -> None:
    client = await connect(server)
    await log_in_new(client, "large-props")
    queue = (await client.ok(frames.CreateQueue("large"))).queue  # type: ignore[union-attr]
    largest = {key * 255: "v" * 4096 for key in "kji"} | {"h" * 255: "v" * 3076}
    assert protocol.properties_size(largest) == protocol.MAX_PROPERTIES_BYTES
    body = b"b" * (64 * 1024)  # the default body limit
    await client.ok(frames.Send((queue.id,), body, None, 5, None, properties=largest))
    read = await client.ok(frames.Read(queue.id, None, models.Order.TIME, pop=True))
    assert isinstance(read, frames.MessageReply) and read.message.properties == largest

    # 100 small bodies, but 1.6 MB of properties: past the 1 MiB batch limit.
    drafts = tuple(models.Draft(b"x", properties=largest) for _ in range(100))
    assert await client.error(frames.SendMany((queue.id,), drafts)) == Status.PAYLOAD_TOO_LARGE
    assert isinstance(await client.ok(frames.Ping()), frames.Pong)  # the connection stays
    empty = await client.ok(frames.ReceiveMany(queue.id, None, models.Order.TIME, 10))
    assert isinstance(empty, frames.MessagesReply) and empty.messages == ()
