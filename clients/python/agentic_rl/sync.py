"""The synchronous client: the async one on a private event loop in a background thread."""
from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Any, Coroutine, Iterable, List, Mapping, Optional, TypeVar

from .types import Reward, State, StepResult

if TYPE_CHECKING:
    from .client import Action, Env

T = TypeVar("T")


class SyncEnv:
    """``Env(...).sync()``: the same methods, blocking.

    >>> with Env("http://127.0.0.1:8000").sync() as env:
    ...     r = env.reset()
    ...     r = env.step("get_weather", {"city": "Paris"})
    """

    def __init__(self, env: "Env"):
        self._env = env
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="agentic-rl-client", daemon=True)
        self._thread.start()

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def __enter__(self) -> "SyncEnv":
        self._run(self._env.connect())
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._loop.is_closed():
            return
        self._run(self._env.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    @property
    def episode_id(self) -> Optional[str]:
        return self._env.episode_id

    def reset(self, seed: Optional[int] = None, task_id: Optional[str] = None, episode_id: Optional[str] = None) -> StepResult:
        return self._run(self._env.reset(seed=seed, task_id=task_id, episode_id=episode_id))

    def step(self, action: "Action", params: Optional[Mapping[str, Any]] = None) -> StepResult:
        return self._run(self._env.step(action, params))

    def dispatch(self, action: "Action", params: Optional[Mapping[str, Any]] = None) -> str:
        return self._run(self._env.dispatch(action, params))

    def dispatch_many(self, actions: Iterable["Action"]) -> List[str]:
        return self._run(self._env.dispatch_many(list(actions)))

    def resolve(self, trace_ids: Iterable[str], timeout_ms: Optional[float] = None) -> List[StepResult]:
        return self._run(self._env.resolve(list(trace_ids), timeout_ms))

    def state(self) -> State:
        return self._run(self._env.state())

    def state_at(self, seq: int) -> State:
        return self._run(self._env.state_at(seq))

    def rewards(self, episode_id: Optional[str] = None) -> List[Reward]:
        return self._run(self._env.rewards(episode_id))

    def subscribe(self) -> None:
        self._run(self._env.subscribe())

    def next_reward(self, timeout_s: Optional[float] = None) -> Reward:
        return self._run(self._env.next_reward(timeout_s))
