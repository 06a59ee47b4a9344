"""A Gymnasium-style wrapper for simple loops: ``reset() -> (obs, info)``, ``step(a) -> (obs, reward, terminated, truncated, info)``.

No gymnasium dependency: the methods have its shapes, so a loop written for Gymnasium runs as is.
The observation is the tool's output; ``info`` holds the actions enabled now, the trace id and
the per-source rewards (a delayed source is "pending" until it lands: see ``Env.subscribe``).
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple

from .client import Action, Env
from .sync import SyncEnv
from .types import StepResult


def _info(r: StepResult) -> Dict[str, Any]:
    return {
        "episode_id": r.episode_id,
        "trace_id": r.trace_id,
        "step": r.step,
        "actions": r.action_names,
        "tools": r.actions,
        "rewards": r.rewards,
        "error": r.error,
        **({"instruction": r.instruction, "task_id": r.task_id} if r.task_id else {}),
    }


class GymEnv:
    def __init__(self, base_url: str = "http://127.0.0.1:8000", token: Optional[str] = None):
        self._env: SyncEnv = Env(base_url, token).sync()
        self._env.__enter__()

    def reset(self, *, seed: Optional[int] = None, options: Optional[Mapping[str, Any]] = None) -> Tuple[Any, Dict[str, Any]]:
        r = self._env.reset(seed=seed, task_id=(options or {}).get("task_id"))
        return r.observation, _info(r)

    def step(self, action: Action) -> Tuple[Any, float, bool, bool, Dict[str, Any]]:
        r = self._env.step(action)
        terminated = r.done and not r.truncated
        return r.observation, float(r.reward or 0.0), terminated, r.truncated, _info(r)

    @property
    def unwrapped(self) -> SyncEnv:
        return self._env

    def close(self) -> None:
        self._env.close()
