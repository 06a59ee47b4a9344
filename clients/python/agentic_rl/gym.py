"""A Gymnasium environment over `agent serve`: ``reset() -> (obs, info)``, ``step(a) -> (obs, reward, terminated, truncated, info)``.

With ``gymnasium`` installed (``pip install agentic-rl-client[gym]``), :class:`GymEnv` is a real
``gymnasium.Env`` with its two spaces:

- ``observation_space`` is a :class:`JsonSpace`: any JSON value. ``reset`` observes the episode's
  initial state (the env's whole state), ``step`` the tool's output (None for a failed call).
- ``action_space`` is a :class:`ToolCallSpace` of the env's actions (from the server's
  ``GET /schema``): it contains a ``(name, params)`` tuple, a ``{"name", "params"}`` dict or an
  OpenAI tool call naming one of them, and ``sample()`` gives a call with the params each
  schema requires, at their simplest values (well-formed, not sensible).

``info`` holds the actions enabled now, the trace id and the per-source rewards (a delayed source
is "pending" until it lands: see ``Env.subscribe``). A malformed action is an ``InvalidAction``
naming what is wrong, before anything is sent. Without gymnasium the methods keep these shapes
and both spaces are there (``contains``, ``sample``, ``seed``); only gymnasium's own machinery
(``spec``, ``gymnasium.make``, the env checker) needs it.
"""
from __future__ import annotations

import importlib.util
import json
import random
import urllib.error
import urllib.request
from typing import TYPE_CHECKING, Any, Dict, Generic, List, Mapping, Optional, Sequence, SupportsFloat, Tuple, TypeVar

from .actions import Action, to_wire
from .client import _ws_url
from .errors import ConnectionLost, InvalidAction, ProtocolError
from .sync import SyncEnv
from .types import StepResult

_O = TypeVar("_O")
_A = TypeVar("_A")

# gymnasium is optional: without it the wrapper is a plain class of the same shapes, with no spaces.
_HAS_GYMNASIUM = importlib.util.find_spec("gymnasium") is not None

if TYPE_CHECKING or _HAS_GYMNASIUM:
    from gymnasium import Env as _Base
    from gymnasium.spaces import Space as _Space
else:  # pragma: no cover - exercised where gymnasium is absent

    class _Base(Generic[_O, _A]):
        pass

    class _Random:
        """The part of numpy's Generator the spaces use."""

        def __init__(self, seed: Optional[int]) -> None:
            self._random = random.Random(seed)

        def integers(self, n: int) -> int:
            return self._random.randrange(n)

    class _Space(Generic[_O]):
        """What gymnasium's Space gives the two spaces here: a seeded ``np_random``."""

        def __init__(self, seed: Optional[int] = None) -> None:
            self.np_random = _Random(seed)

        def seed(self, seed: Optional[int] = None) -> List[Optional[int]]:
            self.np_random = _Random(seed)
            return [seed]


def _simplest(schema: Any) -> Any:
    """The simplest value a JSON schema allows, for the params it requires (enough for a well-formed call)."""
    if not isinstance(schema, dict):
        return None
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {k: _simplest(props.get(k)) for k in schema.get("required", []) if isinstance(k, str)}
    if kind == "array":
        return [_simplest(schema.get("items")) for _ in range(int(schema.get("minItems", 0)))]
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    if kind == "string":
        return "x" * int(schema.get("minLength", 0))
    return None


def _is_json(x: Any, depth: int = 0) -> bool:
    if depth > 512:
        return False
    if x is None or isinstance(x, (str, bool, int, float)):
        return True
    if isinstance(x, (list, tuple)):
        return all(_is_json(v, depth + 1) for v in x)
    if isinstance(x, dict):
        return all(isinstance(k, str) and _is_json(v, depth + 1) for k, v in x.items())
    return False


class JsonSpace(_Space[Any]):
    """Any JSON value (None, bool, number, string, list, object of string keys). ``sample()`` is None, a JSON value."""

    def __init__(self) -> None:
        super().__init__()

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def contains(self, x: Any) -> bool:
        return _is_json(x)

    def sample(self, mask: Any = None, probability: Any = None) -> Any:
        return None

    def __repr__(self) -> str:
        return "JsonSpace()"


class ToolCallSpace(_Space[Tuple[str, Dict[str, Any]]]):
    """Calls of the env's actions: ``(name, params)`` with ``name`` one of ``tools``; params are checked by the server."""

    def __init__(self, tools: Mapping[str, Any], seed: Optional[int] = None) -> None:
        self.tools: Dict[str, Any] = dict(tools)
        super().__init__(seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def contains(self, x: Any) -> bool:
        try:
            wire = to_wire(x)
        except InvalidAction:
            return False
        fn = wire.get("function")
        return (fn["name"] if isinstance(fn, Mapping) else wire["name"]) in self.tools

    def sample(self, mask: Any = None, probability: Any = None) -> Tuple[str, Dict[str, Any]]:
        names: Sequence[str] = sorted(self.tools)
        if not names:
            raise InvalidAction("the env has no actions to sample", "ACTION_UNKNOWN")
        name = names[int(self.np_random.integers(len(names)))]
        params = _simplest(self.tools[name])
        return name, params if isinstance(params, dict) else {}

    def __repr__(self) -> str:
        return f"ToolCallSpace({sorted(self.tools)})"


def _fetch_schema(url: str, token: Optional[str], timeout_s: float) -> Dict[str, Any]:
    http = url[: -len("/ws")] if url.endswith("/ws") else url
    http = "http" + http[len("ws"):] if http.startswith("ws") else http
    req = urllib.request.Request(f"{http}/schema", headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as res:
            schema = json.load(res)
    except (urllib.error.URLError, OSError, ValueError) as err:
        raise ConnectionLost(f"cannot read {http}/schema: {err}", "CONNECTION_FAILED") from err
    if not isinstance(schema, dict) or not isinstance(schema.get("action"), dict):
        raise ProtocolError(f"{http}/schema has no action schema", "PROTOCOL")
    return schema


def _tools(schema: Dict[str, Any]) -> Dict[str, Any]:
    tools: Dict[str, Any] = {}
    for one in schema["action"].get("oneOf", []):
        props = one.get("properties", {}) if isinstance(one, dict) else {}
        name = (props.get("name") or {}).get("const")
        if isinstance(name, str):
            tools[name] = props.get("params", {})
    return tools


def _info(r: StepResult[Any]) -> Dict[str, Any]:
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


class GymEnv(_Base[Any, Action]):
    """One served episode at a time, as a Gymnasium environment (see the module's notes for the spaces)."""

    metadata: Dict[str, Any] = {"render_modes": []}

    def __init__(self, base_url: str = "http://127.0.0.1:8000", token: Optional[str] = None, timeout_s: float = 300.0):
        self._env: SyncEnv[Any, Any] = SyncEnv(base_url, token, timeout_s=timeout_s)
        try:
            self._env.connect()
            tools = _tools(_fetch_schema(_ws_url(base_url), token, timeout_s))
        except BaseException:
            self._env.close()
            raise
        self.action_space = ToolCallSpace(tools)
        self.observation_space = JsonSpace()
        if _HAS_GYMNASIUM:
            from gymnasium.envs.registration import EnvSpec

            # A served env's tools may draw from the run's randomness (simulated latency, a judge):
            # one seed and one action need not give one observation, and gymnasium's checker is told so.
            # The spec also makes the same env again (gymnasium.make(env.spec): a vector env's workers).
            self.spec = EnvSpec(id="AgenticRL/Served-v0", entry_point="agentic_rl.gym:GymEnv", nondeterministic=True, kwargs={"base_url": base_url, "token": token, "timeout_s": timeout_s})

    def reset(self, *, seed: Optional[int] = None, options: Optional[Mapping[str, Any]] = None) -> Tuple[Any, Dict[str, Any]]:
        """A new episode (``options``: ``task_id`` for a suite's task, ``episode_id``); observes its initial state."""
        if _HAS_GYMNASIUM:
            super().reset(seed=seed)
        o = options or {}
        r = self._env.reset(seed=seed, task_id=o.get("task_id"), episode_id=o.get("episode_id"))
        return self._env.state().state, _info(r)

    def step(self, action: Action) -> Tuple[Any, SupportsFloat, bool, bool, Dict[str, Any]]:
        r = self._env.step(action)
        terminated = r.done and not r.truncated
        return r.observation, float(r.reward or 0.0), terminated, r.truncated, _info(r)

    @property
    def unwrapped(self) -> GymEnv:
        return self

    @property
    def client(self) -> SyncEnv[Any, Any]:
        """The session underneath: state, time travel, dispatch/resolve, rewards."""
        return self._env

    def close(self) -> None:
        self._env.close()


__all__: List[str] = ["GymEnv", "JsonSpace", "ToolCallSpace"]
