"""No client call hangs or balloons: the client against servers that die, lie, stall or flood."""
from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import signal
import time
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Dict

import pytest
from websockets.asyncio.server import ServerConnection, serve

from agentic_rl import ConnectionLost, Env, ProtocolError, RequestTimeout, SyncEnv

from .conftest import Served

Handler = Callable[[ServerConnection], Awaitable[None]]


async def _fake(handler: Handler) -> AsyncIterator[str]:
    async with serve(handler, "127.0.0.1", 0, max_size=None) as server:
        port = list(server.sockets)[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"


def _answer(msg: Dict[str, Any]) -> str:
    if msg["type"] == "reset":
        return json.dumps({"id": msg["id"], "type": "observation", "data": {"observation": {"observation": None, "actions": [], "episode_id": "ep-fake", "trace_id": None, "step": 0}, "reward": None, "done": False, "rewards": {}}})
    if msg["type"] == "state":
        return json.dumps({"id": msg["id"], "type": "state", "data": {"episode_id": "ep-fake", "step_count": 0, "state": {"n": 1}, "seq": 0, "done": False}})
    return json.dumps({"id": msg["id"], "type": msg["type"], "data": {}})


def _served_killed(tmp_path: Path) -> Served:
    return Served("fixtures/weather", tmp_path)


async def test_a_killed_server_fails_every_waiter_at_once_reward_readers_included(tmp_path: Path) -> None:
    served = _served_killed(tmp_path)
    try:
        async with Env(served.url) as env:
            await env.subscribe()
            await env.reset()
            reward = asyncio.ensure_future(env.next_reward())
            stream = asyncio.ensure_future(env.rewards_stream().__anext__())
            await asyncio.sleep(0)
            served.proc.send_signal(signal.SIGKILL)
            started = time.monotonic()
            for waiter in (reward, stream):
                with pytest.raises(ConnectionLost) as lost:
                    await asyncio.wait_for(waiter, 10)
                assert lost.value.code == "CONNECTION_LOST"
            assert time.monotonic() - started < 10
            # Every later call fails at once with the same typed error, never websockets' own.
            with pytest.raises(ConnectionLost):
                await env.state()
            with pytest.raises(ConnectionLost):
                await env.next_reward(timeout_s=5)
    finally:
        served.proc.wait(timeout=10)


def test_the_sync_client_surfaces_a_killed_server_as_connection_lost(tmp_path: Path) -> None:
    served = _served_killed(tmp_path)
    try:
        with SyncEnv(served.url) as env:
            env.reset()
            served.proc.send_signal(signal.SIGKILL)
            served.proc.wait(timeout=10)
            with pytest.raises(ConnectionLost):
                env.step("get_weather", {"city": "Paris"})
    finally:
        served.proc.wait(timeout=10)


async def test_a_frame_that_is_not_json_is_logged_and_the_reader_lives_on(caplog: pytest.LogCaptureFixture) -> None:
    async def handler(ws: ServerConnection) -> None:
        async for raw in ws:
            msg = json.loads(raw)
            if msg["type"] == "reset":
                await ws.send("<html>oops</html>")
            await ws.send(_answer(msg))

    async for url in _fake(handler):
        async with Env(url, timeout_s=5) as env:
            await env.reset()
            assert (await env.state()).state == {"n": 1}
    assert any("not JSON" in r.getMessage() for r in caplog.records)


async def test_a_reply_of_the_wrong_shape_is_a_protocol_error_for_its_call() -> None:
    async def handler(ws: ServerConnection) -> None:
        async for raw in ws:
            msg = json.loads(raw)
            reply = {"id": msg["id"], "type": "state", "data": {"step_count": "many"}} if msg["type"] == "state" else json.loads(_answer(msg))
            await ws.send(json.dumps(reply))

    async for url in _fake(handler):
        async with Env(url, timeout_s=5) as env:
            await env.reset()
            with pytest.raises(ProtocolError) as bad:
                await env.state()
            assert "step_count" in bad.value.message
            assert (await env.reset()).episode_id == "ep-fake"


async def test_the_timeout_covers_the_send_to_a_server_that_never_reads() -> None:
    stalled: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # A WebSocket handshake, then never a read again.
        head = await reader.readuntil(b"\r\n\r\n")
        key = next(line.split(b":", 1)[1].strip() for line in head.split(b"\r\n") if line.lower().startswith(b"sec-websocket-key"))
        accept = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
        writer.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n")
        await writer.drain()
        await stalled
        writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        env: Env[Any, Any] = Env(f"http://127.0.0.1:{port}", timeout_s=1)
        await env.connect()
        started = time.monotonic()
        with pytest.raises(RequestTimeout) as timed_out:
            await env.step("get_weather", {"city": "x" * 8_000_000})
        assert timed_out.value.code == "TIMEOUT" and isinstance(timed_out.value, TimeoutError)
        assert time.monotonic() - started < 5
        stalled.set_result(None)
        await env.close()
    finally:
        server.close()
        await server.wait_closed()


async def test_a_frame_over_max_size_is_refused_and_named() -> None:
    async def handler(ws: ServerConnection) -> None:
        async for raw in ws:
            msg = json.loads(raw)
            await ws.send(json.dumps({"id": msg["id"], "type": "state", "data": {"state": "x" * 2_000_000}}))

    async for url in _fake(handler):
        async with Env(url, timeout_s=5, max_size=1_000_000) as env:
            with pytest.raises(ConnectionLost) as lost:
                await env.state()
            assert "max_size" in lost.value.message
