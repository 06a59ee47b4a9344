"""Every failure of the client, as one exception class per kind, each carrying a code.

The server's errors keep the server's code (``ACTION_UNKNOWN``, ``PARAMS_INVALID``, …); failures of
the connection itself have the client's own (``CONNECTION_FAILED``, ``CONNECTION_LOST``,
``TIMEOUT``, ``PROTOCOL``). Nothing from the ``websockets`` library reaches the caller.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Type

from ._codes import EXCEPTION_BY_CODE


class AgentRLError(Exception):
    """An error of the client or the server: ``code`` says which (``ACTION_UNKNOWN``, ``CONNECTION_LOST``, …)."""

    def __init__(self, message: str, code: str = "INTERNAL", hint: Optional[str] = None, pointer: Optional[str] = None):
        super().__init__(f"{code}: {message}" + (f" ({hint})" if hint else ""))
        self.message = message
        self.code = code
        self.hint = hint
        self.pointer = pointer


class InvalidAction(AgentRLError):
    """The action is unknown, disabled in this state, malformed, or its params break its schema."""


class EpisodeOver(AgentRLError):
    """No episode to act in: reset first, or reset again after done."""


class CapacityReached(AgentRLError):
    """Every session of the server is taken."""


class UnknownEpisode(AgentRLError):
    """No episode of that id in this session (never opened here, another client's, or gone)."""


class EpisodeExists(AgentRLError):
    """A reset named an episode id that is already taken on the server."""


class ConnectionLost(AgentRLError):
    """The connection could not be made, or closed: every request waiting on it fails at once with this."""


class RequestTimeout(AgentRLError, TimeoutError):
    """A request (its send included) took longer than its timeout; the connection stays usable."""


class ProtocolError(AgentRLError):
    """The server sent something the client cannot read (not JSON, or not the shape asked for)."""


_CLASSES: Mapping[str, Type[AgentRLError]] = {
    "InvalidAction": InvalidAction,
    "EpisodeOver": EpisodeOver,
    "CapacityReached": CapacityReached,
    "UnknownEpisode": UnknownEpisode,
    "EpisodeExists": EpisodeExists,
}
# The toolkit's table of codes (src/shared/error-codes.ts) says which exception each code is.
_BY_CODE: Mapping[str, Type[AgentRLError]] = {code: _CLASSES[name] for code, name in EXCEPTION_BY_CODE.items()}


def error_from(data: Any) -> AgentRLError:
    """The exception for an error the server answered (``{message, code, hint?, pointer?}``)."""
    if not isinstance(data, dict):
        return ProtocolError(f"the server answered an error that is not an object: {data!r:.200}", "PROTOCOL")
    d: Dict[str, Any] = data
    code = str(d.get("code", "INTERNAL"))
    cls = _BY_CODE.get(code, AgentRLError)
    hint = d.get("hint")
    pointer = d.get("pointer")
    return cls(str(d.get("message", "unknown error")), code, hint if isinstance(hint, str) else None, pointer if isinstance(pointer, str) else None)
