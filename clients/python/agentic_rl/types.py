"""Typed results: what `agent serve` answers, as dataclasses (the raw JSON stays at hand in ``raw``).

``StepResult`` is generic over the tool's observation and ``State`` over the env's state, so a
trainer can say what its env holds: ``Env[WeatherObs, WeatherState]``. A reply that is not of the
shape asked for is a :class:`~agentic_rl.errors.ProtocolError`, not a ``KeyError`` later.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Generic, List, Mapping, Optional, Tuple, TypeVar

from .errors import ProtocolError

ObsT = TypeVar("ObsT")
StateT = TypeVar("StateT")


def _object(d: Any, what: str) -> Dict[str, Any]:
    if not isinstance(d, dict):
        raise ProtocolError(f"{what} is not an object: {d!r:.200}", "PROTOCOL")
    return d


def _int(v: Any, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ProtocolError(f"{what} is not a number: {v!r:.100}", "PROTOCOL")
    return int(v)


def _number(v: Any) -> Optional[float]:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _str(v: Any) -> Optional[str]:
    return v if isinstance(v, str) else None


@dataclass(frozen=True)
class RewardEntry:
    """One reward source's part of a step: ``status`` is pending, arrived, fallback, late or failed."""

    status: str
    value: Optional[float]
    delay_ms: Optional[float] = None

    @staticmethod
    def parse(d: Any) -> RewardEntry:
        o = _object(d, "a reward entry")
        return RewardEntry(status=str(o.get("status", "pending")), value=_number(o.get("value")), delay_ms=_number(o.get("delay_ms")))


@dataclass(frozen=True)
class StepResult(Generic[ObsT]):
    """A reply to reset or step. ``observation`` is the tool's output (None on reset and for a failed step)."""

    observation: Optional[ObsT]
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
    #: In an env with two sides (τ²-bench telecom): the user's actions enabled now, sent with ``"actor": "user"``.
    user_actions: List[Dict[str, Any]] = field(default_factory=list)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def action_names(self) -> List[str]:
        return [str(a.get("function", {}).get("name", "")) for a in self.actions]

    @property
    def user_action_names(self) -> List[str]:
        return [str(a.get("function", {}).get("name", "")) for a in self.user_actions]

    @staticmethod
    def parse(d: Any) -> StepResult[Any]:
        o = _object(d, "a step result")
        obs = _object(o.get("observation") or {}, "a step result's observation")
        info = _object(o.get("info") or {}, "a step result's info")
        actions = obs.get("actions", [])
        user_actions = obs.get("user_actions", [])
        for tools in (actions, user_actions):
            if not isinstance(tools, list) or not all(isinstance(a, dict) for a in tools):
                raise ProtocolError(f"a step result's actions are not a list of tools: {tools!r:.200}", "PROTOCOL")
        rewards = _object(o.get("rewards") or {}, "a step result's rewards")
        error = obs.get("error")
        return StepResult(
            observation=obs.get("observation"),
            reward=_number(o.get("reward")),
            done=bool(o.get("done", False)),
            truncated=bool(o.get("truncated", False)),
            episode_id=str(obs.get("episode_id", "")),
            trace_id=_str(obs.get("trace_id")),
            step=_int(obs.get("step", 0), "a step result's step"),
            actions=list(actions),
            rewards={str(k): RewardEntry.parse(v) for k, v in rewards.items()},
            status=_str(info.get("status")),
            error=error if isinstance(error, dict) else None,
            instruction=_str(obs.get("instruction")),
            task_id=_str(obs.get("task_id")),
            user_actions=list(user_actions),
            raw=o,
        )


@dataclass(frozen=True)
class State(Generic[StateT]):
    """OpenEnv's state (``episode_id``, ``step_count``) with the env's full state and its seq."""

    episode_id: str
    step_count: int
    state: StateT
    seq: int
    done: bool

    @staticmethod
    def parse(d: Any) -> State[Any]:
        o = _object(d, "a state")
        return State(episode_id=str(o.get("episode_id", "")), step_count=_int(o.get("step_count", 0), "a state's step_count"), state=o.get("state"), seq=_int(o.get("seq", 0), "a state's seq"), done=bool(o.get("done", False)))


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
    def parse(d: Any, episode_id: str = "") -> Reward:
        o: Mapping[str, Any] = _object(d, "a reward")
        return Reward(
            type=str(o.get("type", "")),
            episode_id=str(o.get("episode_id", episode_id)),
            trace_id=str(o.get("trace_id", "")),
            step=_int(o.get("step", 0), "a reward's step"),
            source=str(o.get("source", "")),
            value=_number(o.get("value")),
            reward=_number(o.get("reward")),
            raw=dict(o),
        )


@dataclass(frozen=True)
class RolloutGroup:
    """One task's K episodes of a rollouts request, as token records (``agent export --format tokens``).

    Each record is a dict with ``input_ids``, ``loss_mask`` (1 exactly on generated ids),
    ``logprobs`` (the sampler's, None elsewhere), ``turns`` (spans with their rewards and
    ``weight_version``), ``reward``, ``group_id``, ``weight_version`` (its oldest turn's).
    ``weight_versions`` lists its turns' distinct versions (two or more when a weight update came
    while its episodes ran). ``staleness`` is how many versions its oldest turn (its newest, with
    ``staleness_from="newest"``) was behind when the group completed.
    ``missing`` lists the rewards still pending when the group's wait for them ran out
    (``reward_wait_s``), each ``{episode, trace_id, source}``: the records count them as 0.
    """

    task_id: str
    group_id: str
    records: List[Dict[str, Any]]
    weight_version: Optional[int]
    staleness: Optional[int]
    reruns: int = 0
    missing: Tuple[Dict[str, Any], ...] = ()
    weight_versions: Tuple[int, ...] = ()

    @property
    def rewards(self) -> List[float]:
        return [float(r.get("reward", 0.0)) for r in self.records]

    @staticmethod
    def parse(d: Any) -> RolloutGroup:
        o = _object(d, "a rollout group")
        records = o.get("records")
        if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
            raise ProtocolError(f"a rollout group has no records list: {records!r:.200}", "PROTOCOL")
        version, staleness = o.get("weight_version"), o.get("staleness")
        return RolloutGroup(
            task_id=str(o.get("task_id", "")),
            group_id=str(o.get("group_id", "")),
            records=records,
            weight_version=None if version is None else _int(version, "weight_version"),
            staleness=None if staleness is None else _int(staleness, "staleness"),
            reruns=_int(o.get("reruns", 0), "reruns"),
            missing=tuple(_object(m, "a missing reward") for m in o.get("missing", []) or []),
            weight_versions=tuple(_int(v, "weight_versions") for v in o.get("weight_versions", []) or []),
        )


@dataclass(frozen=True)
class RolloutSummary:
    """What a rollouts request did: groups sent, episodes run, stale groups dropped and re-runs,
    groups not sent because an episode of theirs ended before its first model turn (``failed``;
    ``failures``: the first few such episodes, each ``{task_id, episode, reason, error?}``), groups
    left out by the request's filter (``filtered``: ``{"zero_variance": k, "reward_range": m}``),
    groups started in all (``tried``) and cancelled once enough were in (``surplus``)."""

    groups: int
    episodes: int
    dropped: int
    rerun: int
    max_staleness_seen: Optional[int]
    failed: int = 0
    failures: Tuple[Dict[str, Any], ...] = ()
    filtered: Dict[str, int] = field(default_factory=dict)
    tried: int = 0
    surplus: int = 0

    @staticmethod
    def parse(d: Any) -> RolloutSummary:
        o = _object(d, "a rollouts summary")
        seen = o.get("max_staleness_seen")
        return RolloutSummary(
            groups=_int(o.get("groups", 0), "groups"),
            episodes=_int(o.get("episodes", 0), "episodes"),
            dropped=_int(o.get("dropped", 0), "dropped"),
            rerun=_int(o.get("rerun", 0), "rerun"),
            max_staleness_seen=None if seen is None else _int(seen, "max_staleness_seen"),
            failed=_int(o.get("failed", 0), "failed"),
            failures=tuple(_object(f, "a rollout failure") for f in o.get("failures", []) or []),
            filtered={str(k): _int(v, "filtered") for k, v in _object(o.get("filtered", {}) or {}, "filtered").items()},
            tried=_int(o.get("tried", 0), "tried"),
            surplus=_int(o.get("surplus", 0), "surplus"),
        )
