"""Typed results: what `agent serve` answers, as dataclasses (the raw JSON stays at hand in ``raw``)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional


@dataclass(frozen=True)
class RewardEntry:
    """One reward source's part of a step: ``status`` is pending, arrived, fallback, late or failed."""

    status: str
    value: Optional[float]
    delay_ms: Optional[float] = None

    @staticmethod
    def parse(d: Dict[str, Any]) -> "RewardEntry":
        return RewardEntry(status=d.get("status", "pending"), value=d.get("value"), delay_ms=d.get("delay_ms"))


@dataclass(frozen=True)
class StepResult:
    """A reply to reset or step. ``observation`` is the tool's output (None on reset and for a failed step)."""

    observation: Any
    reward: Optional[float]
    done: bool
    truncated: bool
    episode_id: str
    trace_id: Optional[str]
    step: int
    actions: List[Dict[str, Any]]
    rewards: Dict[str, RewardEntry]
    status: Optional[str] = None
    error: Optional[Dict[str, Any]] = None
    instruction: Optional[str] = None
    task_id: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def action_names(self) -> List[str]:
        return [a["function"]["name"] for a in self.actions]

    @staticmethod
    def parse(d: Dict[str, Any]) -> "StepResult":
        obs = d.get("observation") or {}
        info = d.get("info") or {}
        return StepResult(
            observation=obs.get("observation"),
            reward=d.get("reward"),
            done=bool(d.get("done", False)),
            truncated=bool(d.get("truncated", False)),
            episode_id=obs.get("episode_id", ""),
            trace_id=obs.get("trace_id"),
            step=int(obs.get("step", 0)),
            actions=list(obs.get("actions", [])),
            rewards={k: RewardEntry.parse(v) for k, v in (d.get("rewards") or {}).items()},
            status=info.get("status"),
            error=obs.get("error"),
            instruction=obs.get("instruction"),
            task_id=obs.get("task_id"),
            raw=d,
        )


@dataclass(frozen=True)
class State:
    """OpenEnv's state (``episode_id``, ``step_count``) with the env's full state and its seq."""

    episode_id: str
    step_count: int
    state: Any
    seq: int
    done: bool

    @staticmethod
    def parse(d: Dict[str, Any]) -> "State":
        return State(episode_id=d.get("episode_id", ""), step_count=int(d.get("step_count", 0)), state=d.get("state"), seq=int(d.get("seq", 0)), done=bool(d.get("done", False)))


@dataclass(frozen=True)
class Reward:
    """A delayed reward as it lands on its step (``type`` reward_arrived, reward_late, reward_imputed, reward_failed, reward_expected)."""

    type: str
    episode_id: str
    trace_id: str
    step: int
    source: str
    value: Optional[float]
    reward: Optional[float]
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @staticmethod
    def parse(d: Dict[str, Any], episode_id: str = "") -> "Reward":
        return Reward(
            type=d.get("type", ""),
            episode_id=d.get("episode_id", episode_id),
            trace_id=d.get("trace_id", ""),
            step=int(d.get("step", 0)),
            source=d.get("source", ""),
            value=d.get("value"),
            reward=d.get("reward"),
            raw=d,
        )
