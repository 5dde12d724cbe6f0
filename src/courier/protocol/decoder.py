"""Cut a byte stream into frames, without parsing bodies (sans-IO)."""

from __future__ import annotations

from courier.protocol import constants, exceptions, frames


class Decoder:
    """Feed it bytes as they arrive; it returns the frames completed so far.

    Partial data is kept between calls. A bad header (wrong version, a frame over
    ``max_frame_bytes``) leaves the stream without frame boundaries: ``feed`` raises
    a ``FramingError`` and keeps raising it on every later call, so the connection
    must be closed. Complete frames that came before the bad header in the same
    chunk are dropped with it. Bodies are not looked at here; ``codec.parse`` does.

    >>> from courier.protocol import codec, frames
    >>> decoder = Decoder()
    >>> data = codec.encode(7, frames.Ping())
    >>> decoder.feed(data[:5]), len(decoder.feed(data[5:]))
    ([], 1)
    """

    def __init__(self, max_frame_bytes: int = constants.MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self.buffer = bytearray()
        self.error: exceptions.FramingError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received that do not yet make up a whole frame."""
        return len(self.buffer)

    def feed(self, data: bytes) -> list[frames.RawFrame]:
        if self.error is not None:
            raise self.error
        self.buffer += data
        try:
            return self.cut_frames()
        except exceptions.FramingError as exc:
            self.error = exc
            self.buffer.clear()
            raise

    def cut_frames(self) -> list[frames.RawFrame]:
        buffer = self.buffer
        found: list[frames.RawFrame] = []
        start = 0
        while True:
            available = len(buffer) - start
            if available < constants.HEADER_SIZE:
                # Check the version as soon as it arrives: garbage fails fast.
                if available and buffer[start] != constants.VERSION:
                    raise exceptions.UnsupportedVersion(buffer[start])
                break
            version, opcode, flags, request_id, length = constants.HEADER.unpack_from(buffer, start)
            self.check_header(version, length)
            end = start + constants.HEADER_SIZE + length
            if end > len(buffer):
                break
            body = bytes(buffer[start + constants.HEADER_SIZE : end])
            found.append(frames.RawFrame(version, opcode, flags, request_id, body))
            start = end
        del buffer[:start]
        return found

    def check_header(self, version: int, body_length: int) -> None:
        if version != constants.VERSION:
            raise exceptions.UnsupportedVersion(version)
        size = constants.HEADER_SIZE + body_length
        if size > self.max_frame_bytes:
            raise exceptions.FrameTooLarge(size, self.max_frame_bytes)
