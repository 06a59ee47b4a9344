"""Python client for agentic-rl-toolkit's ``agent serve``: drive an env live from a trainer."""
from .client import Env
from .errors import AgentRLError, CapacityReached, ConnectionLost, EpisodeOver, InvalidAction, UnknownEpisode
from .gym import GymEnv
from .sync import SyncEnv
from .types import Reward, RewardEntry, State, StepResult

__all__ = [
    "Env",
    "SyncEnv",
    "GymEnv",
    "StepResult",
    "State",
    "Reward",
    "RewardEntry",
    "AgentRLError",
    "InvalidAction",
    "EpisodeOver",
    "CapacityReached",
    "UnknownEpisode",
    "ConnectionLost",
]
