"""The synchronous client: the async :class:`~agentic_rl.client.Env` on a private event loop in a background thread.

It depends on the async client and nothing depends on it but the Gymnasium wrapper; every call
blocks until the async call ends, which it always does (each request has its timeout).
"""
from __future__ import annotations

import asyncio
import threading
from typing import Any, Coroutine, Generic, Iterable, List, Mapping, Optional, Tuple, TypeVar

from .actions import Action
from .client import DEFAULT_MAX_SIZE, Env
from .types import ObsT, Reward, RolloutGroup, RolloutSummary, State, StateT, StepResult

T = TypeVar("T")


class SyncEnv(Generic[ObsT, StateT]):
    """The async client's methods, blocking.

    >>> with SyncEnv("http://127.0.0.1:8000") as env:
    ...     r = env.reset()
    ...     r = env.step("get_weather", {"city": "Paris"})
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
        self._env: Env[ObsT, StateT] = Env(base_url, token, timeout_s=timeout_s, max_size=max_size, open_timeout_s=open_timeout_s, actions=actions)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="agentic-rl-client", daemon=True)
        self._thread.start()

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def connect(self) -> SyncEnv[ObsT, StateT]:
        self._run(self._env.connect())
        return self

    def __enter__(self) -> SyncEnv[ObsT, StateT]:
        return self.connect()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            self._run(self._env.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()

    @property
    def episode_id(self) -> Optional[str]:
        return self._env.episode_id

    def reset(self, seed: Optional[int] = None, task_id: Optional[str] = None, episode_id: Optional[str] = None) -> StepResult[ObsT]:
        return self._run(self._env.reset(seed=seed, task_id=task_id, episode_id=episode_id))

    def step(self, action: Action, params: Optional[Mapping[str, Any]] = None) -> StepResult[ObsT]:
        return self._run(self._env.step(action, params))

    def dispatch(self, action: Action, params: Optional[Mapping[str, Any]] = None) -> str:
        return self._run(self._env.dispatch(action, params))

    def dispatch_many(self, actions: Iterable[Action]) -> List[str]:
        return self._run(self._env.dispatch_many(list(actions)))

    def resolve(self, trace_ids: Iterable[str], timeout_ms: Optional[float] = None) -> List[StepResult[ObsT]]:
        return self._run(self._env.resolve(list(trace_ids), timeout_ms))

    def state(self) -> State[StateT]:
        return self._run(self._env.state())

    def state_at(self, seq: int) -> State[StateT]:
        return self._run(self._env.state_at(seq))

    def rewards(self, episode_id: Optional[str] = None) -> List[Reward]:
        return self._run(self._env.rewards(episode_id))

    def subscribe(self) -> None:
        self._run(self._env.subscribe())

    def rollouts(self, task_ids: Iterable[str], n: int, base_url: str, model: str, sampling: Optional[Mapping[str, Any]] = None, **options: Any) -> Tuple[List[RolloutGroup], Optional[RolloutSummary]]:
        """Every group of a rollouts request (see ``Env.rollouts``), once all are done, and the request's summary."""

        async def collect() -> Tuple[List[RolloutGroup], Optional[RolloutSummary]]:
            stream = await self._env.rollouts(list(task_ids), n, base_url, model, sampling, **options)
            return await stream.collect(), stream.summary

        return self._run(collect())

    def weight_version(self, version: int) -> int:
        return self._run(self._env.weight_version(version))

    def pause(self) -> int:
        return self._run(self._env.pause())

    def resume(self) -> int:
        return self._run(self._env.resume())

    def next_reward(self, timeout_s: Optional[float] = None) -> Reward:
        return self._run(self._env.next_reward(timeout_s))
