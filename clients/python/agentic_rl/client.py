"""The async client: one WebSocket session of `agent serve`, one episode at a time.

Requests carry an id, so many can be in flight at once on one socket (dispatch while a resolve
waits); replies are matched by id. Delayed rewards come only after ``subscribe()`` — the server
never sends anything unasked — and are read with ``next_reward()`` or ``async for r in
env.rewards_stream()``.

Every call ends: each request's timeout covers its send and its answer (``RequestTimeout``), a
lost connection fails every waiter at once, reward readers included (``ConnectionLost``), a frame
the client cannot read is logged and the reader goes on, and frames over ``max_size`` are refused.
Every failure is one of :mod:`agentic_rl.errors`; none of the ``websockets`` library's escapes.
"""
from __future__ import annotations

import asyncio
import itertools
import json
import logging
import warnings
from typing import TYPE_CHECKING, Any, AsyncIterator, Dict, Generic, Iterable, List, Mapping, Optional, Sequence, Union

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, WebSocketException

from .actions import Action, to_wire
from .errors import AgentRLError, ConnectionLost, ProtocolError, RequestTimeout, error_from
from .types import ObsT, Reward, RolloutGroup, RolloutSummary, State, StateT, StepResult

if TYPE_CHECKING:
    from .sync import SyncEnv

# Env.sync() warns once per process, not on every call.
_sync_warned = False

# Python 3.11+: a deadline on the requesting task itself. wait_for makes a task of its own per
# request, ~8 us of a trainer's CPU a step against ~4 (the send stays inside the deadline either way).
_deadline = getattr(asyncio, "timeout", None)

log = logging.getLogger("agentic_rl")

#: The largest frame the client takes by default: a τ-bench state is 3 MB; past this the server is answered 1009.
DEFAULT_MAX_SIZE = 64 * 1024 * 1024


def _ws_url(base_url: str) -> str:
    url = base_url.rstrip("/")
    if url.startswith("http://"):
        url = "ws://" + url[len("http://"):]
    elif url.startswith("https://"):
        url = "wss://" + url[len("https://"):]
    return url if url.endswith("/ws") else url + "/ws"


class Env(Generic[ObsT, StateT]):
    """An async session of `agent serve`.

    >>> async with Env("http://127.0.0.1:8000") as env:
    ...     r = await env.reset(seed=0)
    ...     r = await env.step("get_weather", {"city": "Paris"})
    ...     ids = await env.dispatch_many([("get_weather", {"city": c}) for c in ("Rome", "Oslo")])

    ``timeout_s`` bounds each request, its send included; ``max_size`` the frames the client takes.
    ``actions="on_change"`` (the default) asks the server to list the enabled actions only when they
    changed (a τ-bench tool list is 9 KB a reply); every result still has them in ``actions``, the
    client fills them in. ``"always"`` has every reply carry them.
    """

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        token: Optional[str] = None,
        timeout_s: float = 300.0,
        max_size: Optional[int] = DEFAULT_MAX_SIZE,
        open_timeout_s: float = 30.0,
        actions: str = "on_change",
    ):
        if actions not in ("always", "on_change"):
            raise ValueError(f'actions must be "always" or "on_change" (got {actions!r})')
        self.base_url = base_url
        self.actions = actions
        # The lists the server last sent: a reply that says they are unchanged gets these.
        self._lists: Dict[str, Any] = {}
        self.url = _ws_url(base_url)
        self.token = token
        self.timeout_s = timeout_s
        self.max_size = max_size
        self.open_timeout_s = open_timeout_s
        self._ws: Optional[ClientConnection] = None
        self._reader: Optional[asyncio.Task[None]] = None
        self._pending: Dict[int, asyncio.Future[Dict[str, Any]]] = {}
        self._streams: Dict[int, asyncio.Queue[Union[Dict[str, Any], ConnectionLost]]] = {}
        self._ids = itertools.count(1)
        self._rewards: asyncio.Queue[Union[Reward, ConnectionLost]] = asyncio.Queue()
        self._lost: Optional[ConnectionLost] = None
        self._closing = False
        self.episode_id: Optional[str] = None

    def sync(self) -> SyncEnv[ObsT, StateT]:
        """Deprecated since 0.1 (removed in 0.3): use ``SyncEnv(base_url, ...)``.

        A blocking client with this one's settings and a connection of its own (it runs its own event
        loop, so it does not share this session).
        """
        global _sync_warned
        if not _sync_warned:
            _sync_warned = True
            warnings.warn("Env(...).sync() is deprecated: use SyncEnv(base_url, ...) (it takes the same arguments)", DeprecationWarning, stacklevel=2)
        from .sync import SyncEnv

        return SyncEnv(self.base_url, self.token, timeout_s=self.timeout_s, max_size=self.max_size, open_timeout_s=self.open_timeout_s, actions=self.actions)

    async def connect(self) -> Env[ObsT, StateT]:
        if self._lost is not None:
            raise self._lost
        if self._ws is None:
            headers = {"Authorization": f"Bearer {self.token}"} if self.token else None
            try:
                self._ws = await connect(self.url, additional_headers=headers, max_size=self.max_size, open_timeout=self.open_timeout_s)
            except Exception as err:  # noqa: BLE001 - any failure to connect is one error for the caller
                raise ConnectionLost(f"cannot connect to {self.url}: {err}", "CONNECTION_FAILED", "Is `agent serve` running there? Check the URL and the token.") from err
            self._reader = asyncio.create_task(self._read(self._ws))
        return self

    async def close(self) -> None:
        """Ends the session: its episode, if still running, is recorded as truncated."""
        self._closing = True
        if self._ws is not None:
            try:
                await self._ws.close()
            except WebSocketException as err:  # already broken: nothing left to close
                log.debug("agentic_rl: closing a broken connection: %s", err)
            self._ws = None
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)
            self._reader = None

    async def __aenter__(self) -> Env[ObsT, StateT]:
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _why_closed(self, ws: ClientConnection) -> str:
        sent = ws.protocol.close_sent
        if sent is not None and sent.code == 1009:
            return f"the server sent a frame over max_size ({self.max_size} bytes); the client closed the connection (pass a larger Env(max_size=…))"
        rcvd = ws.protocol.close_rcvd
        if rcvd is not None:
            return f"the server closed the connection (code {rcvd.code}{': ' + rcvd.reason if rcvd.reason else ''})"
        return "the connection to the server was lost (no close frame: the server died or the network dropped)"

    async def _read(self, ws: ClientConnection) -> None:
        reason = "the connection to the server closed"
        try:
            async for raw in ws:
                self._take(raw)
            reason = self._why_closed(ws)
        except ConnectionClosed:
            reason = self._why_closed(ws)
        except Exception as err:  # noqa: BLE001 - the reader must end by failing its waiters, whatever broke
            reason = f"the client's reader failed: {err!r}"
            log.exception("agentic_rl: the reader failed")
        finally:
            self._lost = ConnectionLost("the session was closed" if self._closing else reason, "CONNECTION_LOST", "The episode is over on the server (truncated); open a new Env to go on.")
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(self._lost)
            self._pending.clear()
            for stream in self._streams.values():
                stream.put_nowait(self._lost)
            self._rewards.put_nowait(self._lost)

    def _take(self, raw: Union[str, bytes]) -> None:
        """One frame: a reply to its request, or a pushed reward. One the client cannot read is logged; reading goes on."""
        try:
            msg = json.loads(raw)
        except ValueError as err:
            log.warning("agentic_rl: dropped a frame that is not JSON (%s): %.200r", err, raw)
            return
        if not isinstance(msg, dict):
            log.warning("agentic_rl: dropped a frame that is not an object: %.200r", msg)
            return
        if msg.get("type") == "reward":
            try:
                self._rewards.put_nowait(Reward.parse(msg.get("data", {})))
            except ProtocolError as err:
                log.warning("agentic_rl: dropped a reward push: %s", err)
            return
        rid = msg.get("id")
        stream = self._streams.get(rid) if isinstance(rid, int) else None
        if stream is not None:
            stream.put_nowait(msg)
            return
        fut = self._pending.pop(rid, None) if isinstance(rid, int) else None
        if fut is None:
            log.warning("agentic_rl: dropped a frame no request waits for: %.200r", msg)
        elif not fut.done():
            fut.set_result(msg)

    async def _request(self, type_: str, data: Any = None) -> Dict[str, Any]:
        await self.connect()
        ws = self._ws
        if ws is None:
            raise ConnectionLost("the session was closed", "CONNECTION_LOST")
        rid = next(self._ids)
        fut: asyncio.Future[Dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        message: Dict[str, Any] = {"type": type_, "id": rid}
        if data is not None:
            message["data"] = data
        try:
            if _deadline is not None:
                async with _deadline(self.timeout_s):
                    return await self._exchange(ws, json.dumps(message), fut)
            return await asyncio.wait_for(self._exchange(ws, json.dumps(message), fut), self.timeout_s)
        except asyncio.TimeoutError:
            raise RequestTimeout(f"{type_} had no answer within {self.timeout_s} s (its send included)", "TIMEOUT", "The server is busy or does not read; raise Env(timeout_s=…) for long tool calls.") from None
        finally:
            self._pending.pop(rid, None)

    async def _exchange(self, ws: ClientConnection, text: str, fut: asyncio.Future[Dict[str, Any]]) -> Dict[str, Any]:
        try:
            await ws.send(text)
        except WebSocketException as err:
            raise self._lost or ConnectionLost(f"cannot send: {err}", "CONNECTION_LOST") from err
        reply = await fut
        if reply.get("type") == "error":
            raise error_from(reply.get("data", {}))
        data = reply.get("data", {})
        if not isinstance(data, dict):
            raise ProtocolError(f"the answer's data is not an object: {data!r:.200}", "PROTOCOL")
        return data

    async def reset(self, seed: Optional[int] = None, task_id: Optional[str] = None, episode_id: Optional[str] = None) -> StepResult[ObsT]:
        """Starts a new episode (ending the session's current one): from a seed's initial state, or a suite's task."""
        data = {k: v for k, v in {"seed": seed, "task_id": task_id, "episode_id": episode_id}.items() if v is not None}
        if self.actions != "always":
            data["actions"] = self.actions
        result: StepResult[ObsT] = StepResult.parse(self._listed(await self._request("reset", data)))
        self.episode_id = result.episode_id
        return result

    async def step(self, action: Action, params: Optional[Mapping[str, Any]] = None) -> StepResult[ObsT]:
        """Dispatches an action and waits for it to settle."""
        return StepResult.parse(self._listed(await self._request("step", to_wire(action, params))))

    def _listed(self, data: Dict[str, Any]) -> Dict[str, Any]:
        """A reply with its action lists: as sent, or the last ones sent when it says they are unchanged."""
        obs = data.get("observation")
        if not isinstance(obs, dict):
            return data
        if obs.pop("actions_unchanged", False) is True:
            obs.update(self._lists)
        else:
            self._lists = {k: obs[k] for k in ("actions", "user_actions") if k in obs}
        return data

    async def dispatch(self, action: Action, params: Optional[Mapping[str, Any]] = None) -> str:
        """Starts a call and returns its trace id at once; ``resolve`` settles it later."""
        trace_id = (await self._request("dispatch", to_wire(action, params))).get("trace_id")
        if not isinstance(trace_id, str):
            raise ProtocolError(f"dispatch answered no trace id: {trace_id!r:.100}", "PROTOCOL")
        return trace_id

    async def dispatch_many(self, actions: Iterable[Action]) -> List[str]:
        """Dispatches every action at once (one round trip each, overlapped)."""
        wire = [to_wire(a) for a in actions]
        return list(await asyncio.gather(*(self.dispatch(a) for a in wire)))

    async def resolve(self, trace_ids: Iterable[str], timeout_ms: Optional[float] = None) -> List[StepResult[ObsT]]:
        """Settles many calls at once; with ``timeout_ms``, a call still running comes back with ``status == "timeout"``."""
        data: Dict[str, Any] = {"trace_ids": list(trace_ids)}
        if timeout_ms is not None:
            data["timeout_ms"] = timeout_ms
        results = (await self._request("resolve", data)).get("results")
        if not isinstance(results, list):
            raise ProtocolError(f"resolve answered no results: {results!r:.200}", "PROTOCOL")
        return [StepResult.parse(r) for r in results]

    async def state(self) -> State[StateT]:
        return State.parse(await self._request("state"))

    async def state_at(self, seq: int) -> State[StateT]:
        """Time travel: the episode's state as it stood at ``seq``."""
        return State.parse(await self._request("state_at", {"seq": seq}))

    async def rewards(self, episode_id: Optional[str] = None) -> List[Reward]:
        """Every delayed reward that has landed on the episode's steps so far (this one, or an earlier one of this session by id)."""
        data = await self._request("rewards", {"episode_id": episode_id} if episode_id else {})
        rewards = data.get("rewards", [])
        if not isinstance(rewards, list):
            raise ProtocolError(f"rewards answered no list: {rewards!r:.200}", "PROTOCOL")
        return [Reward.parse(r, str(data.get("episode_id", ""))) for r in rewards]

    async def subscribe(self) -> None:
        """From now on, delayed rewards of this session's episodes are pushed as they land."""
        await self._request("subscribe")

    async def next_reward(self, timeout_s: Optional[float] = None) -> Reward:
        """The next pushed reward (after ``subscribe``); ``ConnectionLost`` once the connection is gone."""
        if self._ws is None and self._lost is None:
            raise ConnectionLost("not connected: subscribe() first", "CONNECTION_LOST")
        try:
            item = await asyncio.wait_for(self._rewards.get(), timeout_s)
        except asyncio.TimeoutError:
            raise RequestTimeout(f"no reward landed within {timeout_s} s", "TIMEOUT") from None
        if isinstance(item, ConnectionLost):
            self._rewards.put_nowait(item)  # every other reader hears it too
            raise item
        return item

    async def rollouts(
        self,
        task_ids: Iterable[str],
        n: int,
        base_url: Optional[str],
        model: str,
        sampling: Optional[Mapping[str, Any]] = None,
        *,
        weight_version: Optional[int] = None,
        max_staleness: Optional[int] = None,
        stale: str = "rerun",
        concurrency: Optional[int] = None,
        seed: Optional[int] = None,
        tool_parser: Optional[str] = None,
        max_context: Optional[int] = None,
        agent: Union[Sequence[str], Mapping[str, Any], None] = None,
        reward_wait_s: Optional[float] = None,
        groups: Optional[int] = None,
        oversample: Optional[float] = None,
        max_tries: Optional[int] = None,
        sampler: Optional[str] = None,
        filter: Optional[str] = None,
        min_reward: Optional[float] = None,
        max_reward: Optional[float] = None,
        staleness_from: Optional[str] = None,
        success_reward: Optional[float] = None,
    ) -> RolloutStream:
        """Asks for ``n`` episodes of each task, run by the served suite's ``llm:`` agent in token mode
        against ``base_url`` (a vLLM-compatible server): ``async for group in await env.rollouts(…)``
        yields each task's group as soon as its episodes are over and their late rewards landed.
        ``base_url`` must be one of the inference servers ``agent serve`` was started with
        (``--llm-base-url``), or None for the first of them.

        ``sampling``: ``temperature``, ``top_p``, ``max_tokens``. ``weight_version``: the version the
        trainer pushed last (turns the server does not label carry it; see ``weight_version()``).
        ``max_staleness``: a group whose oldest turn is more versions behind is re-run
        (``stale="rerun"``, twice at most) or dropped (``"drop"``), counted in ``stream.summary``;
        ``staleness_from="newest"`` counts from its newest turn instead (partial rollouts: episodes
        that crossed a weight update are kept, each turn labelled with its own version).
        ``filter="zero_variance"``: a group whose rewards are all equal is not sent (GRPO learns
        nothing from it); ``min_reward`` / ``max_reward`` bound a sent group's mean reward.
        ``groups=N``: N groups whose tasks are drawn from ``task_ids`` (the pool) by ``sampler``
        (``"uniform"``, or ``"difficulty"``: the tasks whose recent success is neither 0 nor 1 first,
        by the server's curriculum); a group filtered, dropped or failed is replaced by another draw,
        at most ``max_tries`` groups in all (default 4 × N); ``oversample=1.5`` runs half as many
        again at once and cancels the surplus once N are in. ``success_reward``: the reward from
        which an episode counts as a success in the curriculum (default 1).
        ``agent``: an agent program's command (``["python3", "my_agent.py"]``) that runs each episode
        instead of the suite's agent, its model calls captured in token mode (the server must be started
        with ``--allow-agent-programs``; see the "Train your own agent program" page); or
        ``{"command": [...], "max_turns": 32, "timeout_s": 120}`` to bound each episode's program
        (model calls: ``max_turns``, default 256; wall time: ``timeout_s``, default 1800).
        ``reward_wait_s``: how long a finished episode's pending rewards are awaited (default 60);
        then its group comes without them, listing them in ``group.missing``.
        Bad input is raised here, before any episode runs (the server checks the request and answers it
        accepted or refused); leaving the loop early cancels the rest.
        """
        await self.connect()
        data: Dict[str, Any] = {"task_ids": list(task_ids), "n": n, "model": model, "sampling": dict(sampling or {}), "stale": stale}
        optional = {
            "base_url": base_url, "weight_version": weight_version, "max_staleness": max_staleness, "concurrency": concurrency, "seed": seed,
            "tool_parser": tool_parser, "max_context": max_context, "reward_wait_s": reward_wait_s, "groups": groups, "oversample": oversample,
            "max_tries": max_tries, "sampler": sampler, "filter": filter, "min_reward": min_reward, "max_reward": max_reward,
            "staleness_from": staleness_from, "success_reward": success_reward,
        }
        data.update({k: v for k, v in optional.items() if v is not None})
        if isinstance(agent, Mapping):
            data["agent"] = dict(agent)
        elif agent is not None:
            data["agent"] = {"command": list(agent)}
        rid = next(self._ids)
        queue: asyncio.Queue[Union[Dict[str, Any], ConnectionLost]] = asyncio.Queue()
        self._streams[rid] = queue
        ws = self._ws
        if ws is None or self._lost is not None:
            del self._streams[rid]
            raise self._lost or ConnectionLost("the session was closed", "CONNECTION_LOST")
        try:
            await asyncio.wait_for(ws.send(json.dumps({"type": "rollouts", "id": rid, "data": data})), self.timeout_s)
        except (WebSocketException, asyncio.TimeoutError) as err:
            del self._streams[rid]
            raise self._lost or ConnectionLost(f"cannot send: {err}", "CONNECTION_LOST") from err
        stream = RolloutStream(self, rid, queue)
        await stream._accepted()
        return stream

    async def weight_version(self, version: int) -> int:
        """Tells the server the trainer pushed weights ``version`` to the inference server (never an older one)."""
        got = (await self._request("weight_version", {"version": version})).get("version")
        return _as_int(got, version)

    async def pause(self) -> int:
        """Holds every new completion of this connection's rollouts (those already at the inference server finish) while the trainer pushes weights; returns how many wait."""
        return _as_int((await self._request("pause", {})).get("waiting"), 0)

    async def resume(self) -> int:
        """Lets the held completions go, in the order they were asked for; returns how many."""
        return _as_int((await self._request("resume", {})).get("released"), 0)

    async def _cancel(self, rid: int) -> None:
        if self._lost is None and self._ws is not None:
            await self._request("cancel", {"id": rid})

    def _end_stream(self, rid: int) -> None:
        self._streams.pop(rid, None)

    async def rewards_stream(self) -> AsyncIterator[Reward]:
        """Pushed rewards as they land; ends with ``ConnectionLost`` when the connection goes."""
        while True:
            yield await self.next_reward()


def _as_int(v: Any, fallback: int) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else fallback


class RolloutStream:
    """The groups of one rollouts request, in the order they complete; ``summary`` once it ended.

    Waits for each group at most ``Env(timeout_s=…)``. ``cancel()`` (or ``aclose()``, or leaving an
    ``async with`` block early) ends the request's episodes on the server (``client_closed``).
    """

    def __init__(self, env: Env[Any, Any], rid: int, queue: asyncio.Queue[Union[Dict[str, Any], ConnectionLost]]):
        self._env = env
        self._rid = rid
        self._queue = queue
        self._done = False
        self.summary: Optional[RolloutSummary] = None
        #: What the server accepted: ``{"tasks": …, "episodes": …}``.
        self.accepted: Dict[str, Any] = {}

    async def _accepted(self) -> None:
        """Waits for the server's answer to the request: accepted, or its error raised now."""
        try:
            item = await asyncio.wait_for(self._queue.get(), self._env.timeout_s)
        except asyncio.TimeoutError:
            await self.cancel()
            raise RequestTimeout(f"the server did not answer the rollouts request within {self._env.timeout_s} s", "TIMEOUT") from None
        if isinstance(item, ConnectionLost):
            self._finish()
            raise item
        if item.get("type") == "rollouts_accepted":
            data = item.get("data")
            self.accepted = dict(data) if isinstance(data, dict) else {}
            return
        self._finish()
        if item.get("type") == "error":
            raise error_from(item.get("data", {}))
        raise ProtocolError(f"a rollouts request was answered {item.get('type')!r} before it was accepted", "PROTOCOL")

    def __aiter__(self) -> RolloutStream:
        return self

    async def __anext__(self) -> RolloutGroup:
        if self._done:
            raise StopAsyncIteration
        try:
            item = await asyncio.wait_for(self._queue.get(), self._env.timeout_s)
        except asyncio.TimeoutError:
            raise RequestTimeout(f"no rollout group completed within {self._env.timeout_s} s", "TIMEOUT", "Episodes of long tasks take long: raise Env(timeout_s=…).") from None
        if isinstance(item, ConnectionLost):
            self._finish()
            raise item
        kind = item.get("type")
        if kind == "rollout_group":
            return RolloutGroup.parse(item.get("data"))
        self._finish()
        if kind == "rollouts_done":
            self.summary = RolloutSummary.parse(item.get("data"))
            raise StopAsyncIteration
        if kind == "error":
            raise error_from(item.get("data", {}))
        raise ProtocolError(f"a rollouts request was answered {kind!r}", "PROTOCOL")

    def _finish(self) -> None:
        self._done = True
        self._env._end_stream(self._rid)

    async def collect(self) -> List[RolloutGroup]:
        """Every group, once the request is done."""
        return [g async for g in self]

    async def cancel(self) -> None:
        """Stops the request: its running episodes end ``client_closed``; no more groups come."""
        if not self._done:
            self._finish()
            await self._env._cancel(self._rid)

    async def aclose(self) -> None:
        await self.cancel()

    async def __aenter__(self) -> RolloutStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.cancel()


__all__ = ["Env", "RolloutStream", "AgentRLError", "DEFAULT_MAX_SIZE"]
