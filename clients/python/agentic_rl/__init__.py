"""Python client for agentic-rl-toolkit's ``agent serve``: drive an env live from a trainer."""
from .actions import Action
from .client import Env, RolloutStream
from .errors import (
    AgentRLError,
    CapacityReached,
    ConnectionLost,
    EpisodeExists,
    EpisodeOver,
    InvalidAction,
    ProtocolError,
    RequestTimeout,
    UnknownEpisode,
)
from .gym import GymEnv
from .sync import SyncEnv
from .types import Reward, RewardEntry, RolloutGroup, RolloutSummary, State, StepResult

__all__ = [
    "Action",
    "Env",
    "SyncEnv",
    "GymEnv",
    "StepResult",
    "RolloutStream",
    "RolloutGroup",
    "RolloutSummary",
    "State",
    "Reward",
    "RewardEntry",
    "AgentRLError",
    "InvalidAction",
    "EpisodeOver",
    "EpisodeExists",
    "CapacityReached",
    "UnknownEpisode",
    "ConnectionLost",
    "RequestTimeout",
    "ProtocolError",
]
