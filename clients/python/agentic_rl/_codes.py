"""The server's error codes the client maps to its own exceptions, and those a retry may cure.

Generated from src/shared/error-codes.ts by `npm run docs:errors`: edit the table there, not this file.
"""
from typing import FrozenSet, Mapping

EXCEPTION_BY_CODE: Mapping[str, str] = {
    "PARAMS_INVALID": "InvalidAction",
    "ACTION_UNKNOWN": "InvalidAction",
    "ACTION_WRONG_ACTOR": "InvalidAction",
    "ACTION_DISABLED": "InvalidAction",
    "EPISODE_DONE": "EpisodeOver",
    "TRACE_UNKNOWN": "UnknownEpisode",
    "CAPACITY_REACHED": "CapacityReached",
    "UNKNOWN_EPISODE": "UnknownEpisode",
    "EPISODE_EXISTS": "EpisodeExists",
}

RETRYABLE: FrozenSet[str] = frozenset({
    "TOOL_FAILED",
    "TOOL_CRASHED",
    "TOOL_TIMEOUT",
    "TOOL_CIRCUIT_OPEN",
    "STORE_UNAVAILABLE",
    "FOLDER_LOCKED",
    "CAPACITY_REACHED",
    "LLM_UNAVAILABLE",
})
