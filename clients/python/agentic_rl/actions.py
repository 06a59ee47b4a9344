"""What an action may look like from Python, and its one wire form.

Accepted: ``"get_weather", {"city": …}`` (a name and params), a ``(name, params)`` tuple,
``{"name", "params"}``, or an OpenAI tool call ``{"type": "function", "function": {"name",
"arguments"}}`` (arguments as an object or a JSON string); a mapping may carry ``"actor": "user"``
for the user's side of an env that has two (its actions are ``StepResult.user_actions``). Anything
else is an :class:`InvalidAction` naming the part that is wrong, raised before anything is sent.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple, Union

from .errors import InvalidAction

Action = Union[str, Tuple[str, Mapping[str, Any]], Mapping[str, Any]]

_FORMS = 'an action is "name" with params, (name, params), {"name", "params"} or an OpenAI tool call {"type": "function", "function": {"name", "arguments"}}'


def _bad(pointer: str, what: str) -> InvalidAction:
    return InvalidAction(f"action{pointer or ''} {what}", "PARAMS_INVALID", _FORMS, pointer)


def _params(value: Any, pointer: str) -> Dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _bad(pointer, f"must be an object of params, not {type(value).__name__}")
    return dict(value)


def to_wire(action: Action, params: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """The action as the server takes it; an :class:`InvalidAction` for a malformed one."""
    if isinstance(action, str):
        return {"name": action, "params": _params(params, "/params")}
    if params is not None:
        raise _bad("", "takes params only with a name: pass them inside the action instead")
    if isinstance(action, tuple):
        if len(action) != 2 or not isinstance(action[0], str):
            raise _bad("", "as a tuple must be (name, params)")
        return {"name": action[0], "params": _params(action[1], "/1")}
    if isinstance(action, Mapping):
        actor = action.get("actor")
        if actor not in (None, "agent", "user"):
            raise _bad("/actor", 'must be "agent" (the default) or "user"')
        fn = action.get("function")
        if isinstance(fn, Mapping):
            if not isinstance(fn.get("name"), str):
                raise _bad("/function/name", "must be a string")
            return dict(action)
        if not isinstance(action.get("name"), str):
            raise _bad("/name", "must be a string")
        wire = {"name": action["name"], "params": _params(action.get("params"), "/params")}
        return {**wire, "actor": "user"} if actor == "user" else wire
    raise _bad("", f"cannot be a {type(action).__name__}")
