"""A protocol's drains wait while writing is paused, all wake when it resumes, and
fail once the connection is lost (the client's and the middleware's connections
share this)."""

from __future__ import annotations

import asyncio

import pytest

from courier import write_flow


async def test_drains_wait_while_writing_is_paused_and_all_wake_on_resume() -> None:
    flow = write_flow.WriteFlow()
    await asyncio.wait_for(flow.drain(), 1)  # not paused: no wait
    flow.pause_writing()
    drains = [asyncio.ensure_future(flow.drain()) for _ in range(3)]
    await asyncio.sleep(0.05)
    assert not any(drain.done() for drain in drains)
    flow.resume_writing()
    await asyncio.wait_for(asyncio.gather(*drains), 1)


async def test_a_lost_connection_fails_the_drains_waiting_and_later_ones() -> None:
    flow = write_flow.WriteFlow()
    flow.pause_writing()
    waiting = asyncio.ensure_future(flow.drain())
    await asyncio.sleep(0)
    flow.fail_drains()
    with pytest.raises(ConnectionResetError):
        await asyncio.wait_for(waiting, 1)
    with pytest.raises(ConnectionResetError):
        await flow.drain()
