"""Errors the server answers, as exceptions: one class per kind, each carrying the server's code."""
from __future__ import annotations

from typing import Any, Dict, Optional


class AgentRLError(Exception):
    """An error the server answered: ``code`` is agentic-rl-toolkit's (``ACTION_UNKNOWN``, ``PARAMS_INVALID``, …)."""

    def __init__(self, message: str, code: str = "INTERNAL", hint: Optional[str] = None, pointer: Optional[str] = None):
        super().__init__(f"{code}: {message}" + (f" ({hint})" if hint else ""))
        self.message = message
        self.code = code
        self.hint = hint
        self.pointer = pointer


class InvalidAction(AgentRLError):
    """The action is unknown, disabled in this state, or its params break its schema."""


class EpisodeOver(AgentRLError):
    """No episode to act in: reset first, or reset again after done."""


class CapacityReached(AgentRLError):
    """Every session of the server is taken."""


class UnknownEpisode(AgentRLError):
    """No episode of that id on the server."""


class ConnectionLost(AgentRLError):
    """The connection to the server closed while a request was waiting."""


_BY_CODE = {
    "ACTION_UNKNOWN": InvalidAction,
    "ACTION_DISABLED": InvalidAction,
    "PARAMS_INVALID": InvalidAction,
    "EPISODE_DONE": EpisodeOver,
    "CAPACITY_REACHED": CapacityReached,
    "EPISODE_UNKNOWN": UnknownEpisode,
    "TRACE_UNKNOWN": UnknownEpisode,
}


def error_from(data: Dict[str, Any]) -> AgentRLError:
    code = str(data.get("code", "INTERNAL"))
    cls = _BY_CODE.get(code, AgentRLError)
    return cls(str(data.get("message", "unknown error")), code, data.get("hint"), data.get("pointer"))
