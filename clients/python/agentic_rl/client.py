"""The async client: one WebSocket session of `agent serve`, one episode at a time.

Requests carry an id, so many can be in flight at once on one socket (dispatch while a resolve
waits); replies are matched by id. Delayed rewards come only after ``subscribe()`` — the server
never sends anything unasked — and are read with ``next_reward()`` or ``async for r in env.rewards_stream()``.
"""
from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any, AsyncIterator, Dict, Iterable, List, Mapping, Optional, Union

from websockets.asyncio.client import ClientConnection, connect

from .errors import AgentRLError, ConnectionLost, error_from
from .types import Reward, State, StepResult

Action = Union[Mapping[str, Any], str]


def _ws_url(base_url: str) -> str:
    url = base_url.rstrip("/")
    if url.startswith("http://"):
        url = "ws://" + url[len("http://"):]
    elif url.startswith("https://"):
        url = "wss://" + url[len("https://"):]
    return url if url.endswith("/ws") else url + "/ws"


def _action(action: Action, params: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """``"get_weather", {"city": …}``, ``{"name", "params"}`` or an OpenAI tool call: sent as given."""
    if isinstance(action, str):
        return {"name": action, "params": dict(params or {})}
    return dict(action)


class Env:
    """An async session of `agent serve`.

    >>> async with Env("http://127.0.0.1:8000") as env:
    ...     r = await env.reset(seed=0)
    ...     r = await env.step("get_weather", {"city": "Paris"})
    ...     ids = [env.dispatch_nowait(...)]  # or: ids = await env.dispatch_many([...])
    """

    def __init__(self, base_url: str = "http://127.0.0.1:8000", token: Optional[str] = None, timeout_s: float = 300.0):
        self.url = _ws_url(base_url)
        self.token = token
        self.timeout_s = timeout_s
        self._ws: Optional[ClientConnection] = None
        self._reader: Optional[asyncio.Task[None]] = None
        self._pending: Dict[int, asyncio.Future[Dict[str, Any]]] = {}
        self._ids = itertools.count(1)
        self._rewards: asyncio.Queue[Reward] = asyncio.Queue()
        self.episode_id: Optional[str] = None

    async def connect(self) -> "Env":
        if self._ws is None:
            headers = {"Authorization": f"Bearer {self.token}"} if self.token else None
            try:
                self._ws = await connect(self.url, additional_headers=headers, max_size=None, open_timeout=30)
            except Exception as err:  # noqa: BLE001 - any failure to connect is one error for the caller
                raise ConnectionLost(f"cannot connect to {self.url}: {err}", "CONNECTION_FAILED") from err
            self._reader = asyncio.create_task(self._read())
        return self

    async def close(self) -> None:
        """Ends the session: its episode, if still running, is recorded as truncated."""
        if self._ws is not None:
            await self._ws.close()
            self._ws = None
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)
            self._reader = None

    async def __aenter__(self) -> "Env":
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def sync(self) -> "SyncEnv":
        from .sync import SyncEnv

        return SyncEnv(self)

    async def _read(self) -> None:
        assert self._ws is not None
        try:
            async for raw in self._ws:
                msg = json.loads(raw)
                if msg.get("type") == "reward":
                    self._rewards.put_nowait(Reward.parse(msg.get("data", {})))
                    continue
                fut = self._pending.pop(msg.get("id", -1), None)
                if fut is not None and not fut.done():
                    fut.set_result(msg)
        except Exception:  # noqa: BLE001 - the socket closed under us: every waiter hears it below
            pass
        finally:
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(ConnectionLost("the connection to the server closed", "CONNECTION_CLOSED"))
            self._pending.clear()

    async def _request(self, type_: str, data: Any = None) -> Dict[str, Any]:
        await self.connect()
        assert self._ws is not None
        rid = next(self._ids)
        fut: asyncio.Future[Dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        message: Dict[str, Any] = {"type": type_, "id": rid}
        if data is not None:
            message["data"] = data
        await self._ws.send(json.dumps(message))
        reply = await asyncio.wait_for(fut, self.timeout_s)
        if reply.get("type") == "error":
            raise error_from(reply.get("data", {}))
        return reply.get("data", {})

    async def reset(self, seed: Optional[int] = None, task_id: Optional[str] = None, episode_id: Optional[str] = None) -> StepResult:
        """Starts a new episode (ending the session's current one): from a seed's initial state, or a suite's task."""
        data = {k: v for k, v in {"seed": seed, "task_id": task_id, "episode_id": episode_id}.items() if v is not None}
        result = StepResult.parse(await self._request("reset", data))
        self.episode_id = result.episode_id
        return result

    async def step(self, action: Action, params: Optional[Mapping[str, Any]] = None) -> StepResult:
        """Dispatches an action and waits for it to settle."""
        return StepResult.parse(await self._request("step", _action(action, params)))

    async def dispatch(self, action: Action, params: Optional[Mapping[str, Any]] = None) -> str:
        """Starts a call and returns its trace id at once; ``resolve`` settles it later."""
        return str((await self._request("dispatch", _action(action, params)))["trace_id"])

    async def dispatch_many(self, actions: Iterable[Action]) -> List[str]:
        """Dispatches every action at once (one round trip each, overlapped)."""
        return list(await asyncio.gather(*(self.dispatch(a) for a in actions)))

    async def resolve(self, trace_ids: Iterable[str], timeout_ms: Optional[float] = None) -> List[StepResult]:
        """Settles many calls at once; with ``timeout_ms``, a call still running comes back with ``status == "timeout"``."""
        data: Dict[str, Any] = {"trace_ids": list(trace_ids)}
        if timeout_ms is not None:
            data["timeout_ms"] = timeout_ms
        return [StepResult.parse(r) for r in (await self._request("resolve", data))["results"]]

    async def state(self) -> State:
        return State.parse(await self._request("state"))

    async def state_at(self, seq: int) -> State:
        """Time travel: the episode's state as it stood at ``seq``."""
        return State.parse(await self._request("state_at", {"seq": seq}))

    async def rewards(self, episode_id: Optional[str] = None) -> List[Reward]:
        """Every delayed reward that has landed on the episode's steps so far (this one, or an earlier one by id)."""
        data = await self._request("rewards", {"episode_id": episode_id} if episode_id else {})
        return [Reward.parse(r, data.get("episode_id", "")) for r in data.get("rewards", [])]

    async def subscribe(self) -> None:
        """From now on, delayed rewards of this session's episodes are pushed as they land."""
        await self._request("subscribe")

    async def next_reward(self, timeout_s: Optional[float] = None) -> Reward:
        """The next pushed reward (after ``subscribe``)."""
        return await asyncio.wait_for(self._rewards.get(), timeout_s)

    async def rewards_stream(self) -> AsyncIterator[Reward]:
        while True:
            yield await self._rewards.get()


__all__ = ["Env", "AgentRLError"]
