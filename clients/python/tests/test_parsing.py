"""Unit tests, no server: action forms, reply parsing and the error for every code."""
from __future__ import annotations

from typing import Any

import pytest

from agentic_rl import AgentRLError, CapacityReached, EpisodeExists, EpisodeOver, InvalidAction, ProtocolError, Reward, State, StepResult, UnknownEpisode
from agentic_rl.actions import to_wire
from agentic_rl.errors import error_from


def test_every_action_form_has_one_wire_form() -> None:
    wire = {"name": "get_weather", "params": {"city": "Paris"}}
    assert to_wire("get_weather", {"city": "Paris"}) == wire
    assert to_wire(("get_weather", {"city": "Paris"})) == wire
    assert to_wire({"name": "get_weather", "params": {"city": "Paris"}}) == wire
    assert to_wire("get_weather") == {"name": "get_weather", "params": {}}
    call = {"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    assert to_wire(call) == call
    assert to_wire({"name": "toggle_data", "actor": "user"}) == {"name": "toggle_data", "params": {}, "actor": "user"}
    assert to_wire({"name": "get_weather", "params": {"city": "Paris"}, "actor": "agent"}) == wire


@pytest.mark.parametrize(
    ("action", "params", "pointer"),
    [
        (("get_weather",), None, ""),
        ((3, {}), None, ""),
        (("get_weather", ["Paris"]), None, "/1"),
        ({"params": {}}, None, "/name"),
        ({"name": "get_weather", "params": "Paris"}, None, "/params"),
        ({"type": "function", "function": {"arguments": "{}"}}, None, "/function/name"),
        ("get_weather", "Paris", "/params"),
        ({"name": "get_weather"}, {"city": "Paris"}, ""),
        (42, None, ""),
        ({"name": "toggle_data", "actor": "phone"}, None, "/actor"),
    ],
)
def test_a_malformed_action_is_invalid_action_naming_the_part(action: Any, params: Any, pointer: str) -> None:
    with pytest.raises(InvalidAction) as bad:
        to_wire(action, params)
    assert bad.value.code == "PARAMS_INVALID" and bad.value.pointer == pointer and bad.value.hint


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        ("ACTION_UNKNOWN", InvalidAction),
        ("ACTION_DISABLED", InvalidAction),
        ("PARAMS_INVALID", InvalidAction),
        ("EPISODE_DONE", EpisodeOver),
        ("CAPACITY_REACHED", CapacityReached),
        ("UNKNOWN_EPISODE", UnknownEpisode),
        ("TRACE_UNKNOWN", UnknownEpisode),
        ("EPISODE_EXISTS", EpisodeExists),
        ("STATE_INVALID", AgentRLError),
    ],
)
def test_every_server_code_has_its_class(code: str, cls: type) -> None:
    err = error_from({"message": "m", "code": code, "hint": "h", "pointer": "/x"})
    assert type(err) is cls and (err.code, err.message, err.hint, err.pointer) == (code, "m", "h", "/x")


def test_an_error_that_is_not_an_object_is_a_protocol_error() -> None:
    assert isinstance(error_from("boom"), ProtocolError)


def test_replies_parse_into_typed_results() -> None:
    r = StepResult.parse(
        {
            "observation": {"observation": {"city": "Paris"}, "actions": [{"type": "function", "function": {"name": "get_weather"}}], "episode_id": "e", "trace_id": "ep-0:1", "step": 1},
            "reward": 2,
            "done": False,
            "truncated": False,
            "rewards": {"llm_score": {"status": "pending", "value": None}},
            "info": {"status": "resolved"},
        }
    )
    assert (r.observation, r.reward, r.action_names, r.rewards["llm_score"].status, r.status) == ({"city": "Paris"}, 2.0, ["get_weather"], "pending", "resolved")
    s = State.parse({"episode_id": "e", "step_count": 1, "state": {"n": 1}, "seq": 1, "done": False})
    assert (s.state, s.seq) == ({"n": 1}, 1)
    w = Reward.parse({"type": "reward_arrived", "trace_id": "ep-0:1", "step": 1, "source": "llm_score", "value": 0.5, "reward": 3}, "e")
    assert (w.episode_id, w.value, w.reward) == ("e", 0.5, 3.0)


@pytest.mark.parametrize(
    "bad",
    [
        None,
        [],
        {"observation": "text"},
        {"observation": {"actions": "all"}},
        {"observation": {"step": "one"}},
        {"rewards": [1]},
        {"rewards": {"a": 3}},
    ],
)
def test_a_step_result_of_the_wrong_shape_is_a_protocol_error(bad: Any) -> None:
    with pytest.raises(ProtocolError):
        StepResult.parse(bad)


def test_a_state_or_reward_of_the_wrong_shape_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        State.parse({"seq": None})
    with pytest.raises(ProtocolError):
        Reward.parse("reward")
