"""Our client against `agent serve`: the weather fixture (delayed judge) and τ-bench airline (tasks by id)."""
from __future__ import annotations

import asyncio
import copy
import json
import subprocess
import sys
from typing import Any, Dict

import pytest

from agentic_rl import Env, EpisodeExists, EpisodeOver, GymEnv, InvalidAction, SyncEnv, UnknownEpisode

from .conftest import REPO, tasks


async def test_reset_step_state_and_time_travel(weather) -> None:
    async with Env(weather.url) as env:
        r = await env.reset(seed=0)
        assert r.observation is None and r.reward is None and not r.done
        assert r.action_names == ["get_weather"]
        assert r.actions[0]["function"]["parameters"]["required"] == ["city"]
        s = await env.step("get_weather", {"city": "Paris"})
        assert s.observation["city"] == "Paris" and s.status == "resolved" and s.step == 1
        assert s.rewards["api_latency"].status == "arrived" and s.rewards["llm_score"].status == "pending"
        after = await env.state()
        assert (after.episode_id, after.step_count, after.seq) == (r.episode_id, 1, 1)
        before = await env.state_at(0)
        assert before.seq == 0 and before.state != after.state


async def test_pause_and_resume_answer_how_many_completions_wait(weather) -> None:
    async with Env(weather.url) as env:
        assert await env.pause() == 0
        assert await env.pause() == 0
        assert await env.resume() == 0


async def test_dispatch_many_then_resolve_in_one_batch(weather) -> None:
    async with Env(weather.url) as env:
        await env.reset()
        ids = await env.dispatch_many([{"name": "get_weather", "params": {"city": c}} for c in ("Rome", "Oslo", "Lima")])
        assert len(set(ids)) == 3
        results = await env.resolve(ids, timeout_ms=10_000)
        assert [r.trace_id for r in results] == ids
        assert [r.observation["city"] for r in results] == ["Rome", "Oslo", "Lima"]
        assert sorted(r.step for r in results) == [1, 2, 3]
        # The OpenAI tool-call form is an action too.
        call = {"type": "function", "function": {"name": "get_weather", "arguments": json.dumps({"city": "Kyiv"})}}
        assert (await env.step(call)).observation["city"] == "Kyiv"


async def test_a_call_still_running_comes_back_as_timeout_and_settles_later(weather) -> None:
    async with Env(weather.url) as env:
        await env.reset()
        trace = await env.dispatch("get_weather", {"city": "Paris"})
        partial = (await env.resolve([trace], timeout_ms=0))[0]
        assert partial.status == "timeout" and partial.reward is None
        final = (await env.resolve([trace]))[0]
        assert final.status == "resolved" and final.observation["city"] == "Paris"


async def test_errors_are_typed_and_name_the_field(weather) -> None:
    async with Env(weather.url) as env:
        with pytest.raises(EpisodeOver):
            await env.step("get_weather", {"city": "Paris"})
        await env.reset()
        with pytest.raises(InvalidAction) as unknown:
            await env.step("teleport", {})
        assert unknown.value.code == "ACTION_UNKNOWN"
        with pytest.raises(InvalidAction) as bad:
            await env.step("get_weather", {"city": 7})
        assert bad.value.code == "PARAMS_INVALID" and bad.value.pointer == "/city"
        with pytest.raises(UnknownEpisode):
            await env.rewards("no-such-episode")
        with pytest.raises(InvalidAction) as malformed:
            await env.step(("get_weather",))  # type: ignore[arg-type]
        assert malformed.value.pointer == ""
        # The episode is untouched by the refused calls.
        assert (await env.state()).step_count == 0


async def test_delayed_rewards_are_pushed_to_a_subscriber_on_the_right_step(weather) -> None:
    async with Env(weather.url) as env:
        await env.subscribe()
        await env.reset()
        s = await env.step("get_weather", {"city": "Paris"})
        reward = await env.next_reward(timeout_s=30)
        assert (reward.type, reward.source, reward.trace_id, reward.step) == ("reward_arrived", "llm_score", s.trace_id, 1)
        assert [r.source for r in await env.rewards()] == ["llm_score"]


def test_sync_client_and_gym_wrapper(weather) -> None:
    with SyncEnv(weather.url) as env:
        assert env.reset().action_names == ["get_weather"]
        assert env.step("get_weather", {"city": "Paris"}).observation["city"] == "Paris"
    # The old spelling still works, saying once what replaced it.
    with pytest.warns(DeprecationWarning, match=r"SyncEnv\(base_url"):
        old = Env(weather.url).sync()
    with old as env:
        assert env.reset().action_names == ["get_weather"]
    gym = GymEnv(weather.url)
    obs, info = gym.reset(seed=1)
    # The initial observation is the episode's initial state, as the session's state() has it.
    assert obs == gym.client.state().state and isinstance(obs, dict) and info["actions"] == ["get_weather"]
    assert gym.action_space.contains(("get_weather", {"city": "Oslo"})) and not gym.action_space.contains(("nope", {}))
    obs, reward, terminated, truncated, info = gym.step({"name": "get_weather", "params": {"city": "Oslo"}})
    # The weather API's latency is a cost (weight -0.001 per ms): the step's immediate reward is below 0 until the judge's score lands.
    assert obs["city"] == "Oslo" and reward < 0 and not terminated and not truncated and info["trace_id"]
    gym.close()


async def test_many_sessions_at_once(weather) -> None:
    async def episode(i: int) -> str:
        async with Env(weather.url) as env:
            await env.reset(episode_id=f"py-{i}")
            return (await env.step("get_weather", {"city": f"City {i}"})).observation["city"]

    assert await asyncio.gather(*(episode(i) for i in range(16))) == [f"City {i}" for i in range(16)]


async def test_tau_bench_tasks_by_id_with_their_gold_actions(airline) -> None:
    for task in tasks("tau-bench/airline")[:3]:
        async with Env(airline.url) as env:
            r = await env.reset(task_id=task["id"])
            assert r.task_id == task["id"] and r.instruction == task["instruction"]
            for action in task["actions"]:
                s = await env.step(action)
                assert s.status == "resolved", s.error
            state = await env.state()
            assert state.step_count == len(task["actions"])


async def test_actions_sent_on_change_only_yet_every_result_has_them(airline) -> None:
    task = tasks("tau-bench/airline")[0]
    seen: list = []
    results = {}
    for mode in ("on_change", "always"):
        async with Env(airline.url, actions=mode) as env:
            request = env._request

            async def spy(type_: str, data: Any = None, request: Any = request, mode: str = mode) -> Dict[str, Any]:
                reply = await request(type_, data)
                seen.append((mode, type_, copy.deepcopy(reply["observation"])))
                return reply

            env._request = spy  # type: ignore[method-assign]
            results[mode] = [await env.reset(task_id=task["id"])] + [await env.step(a) for a in task["actions"]]
    # The same lists in every result either way; on the wire, only the reset's (the tool list did not change).
    assert [r.actions for r in results["on_change"]] == [r.actions for r in results["always"]]
    assert results["on_change"][0].actions and all(r.actions == results["on_change"][0].actions for r in results["on_change"])
    wire = [obs for mode, _, obs in seen if mode == "on_change"]
    assert "actions" in wire[0] and all(o.get("actions_unchanged") is True and "actions" not in o for o in wire[1:])
    assert all("actions" in obs and "actions_unchanged" not in obs for mode, _, obs in seen if mode == "always")
    with pytest.raises(ValueError, match="on_change"):
        Env(airline.url, actions="sometimes")


async def test_both_sides_of_a_tau2_telecom_task(tmp_path) -> None:
    from .conftest import Served

    served = Served("tau2-bench/telecom", tmp_path, "--split", "small")
    try:
        task = json.loads((REPO / "fixtures" / "tau2-bench" / "telecom" / "tasks" / "small.jsonl").read_text().splitlines()[0])
        async with Env(served.url) as env:
            r = await env.reset(task_id=task["id"])
            assert "toggle_airplane_mode" in r.user_action_names and "toggle_airplane_mode" not in r.action_names
            for action in task["actions"]:
                s = await env.step(action)
                assert s.status == "resolved", s.error
            assert {"db", "user_db"} <= set((await env.state()).state)
    finally:
        served.stop()
    steps = [json.loads(line) for line in (served.dir / "trajectories.jsonl").read_text().splitlines()]
    assert [s.get("actor", "agent") for s in steps] == [a.get("actor", "agent") for a in task["actions"]]


def test_served_episodes_are_in_the_run_folder(tmp_path) -> None:
    from .conftest import Served

    served = Served("fixtures/weather", tmp_path)
    try:
        with SyncEnv(served.url) as env:
            env.reset()
            env.step("get_weather", {"city": "Paris"})
            env.reset()  # ends the first episode, truncated by its client
        served.wait_idle()
    finally:
        summary = served.stop()
    assert summary["episodes"]["by_reason"] == {"client_closed": 2}
    steps = [json.loads(line) for line in (served.dir / "trajectories.jsonl").read_text().splitlines()]
    assert [s["action"] for s in steps] == ["get_weather"]
    episodes = [json.loads(line) for line in (served.dir / "episodes.jsonl").read_text().splitlines()]
    assert {e["truncated"] for e in episodes} == {True}


async def test_an_episode_id_names_one_episode_and_another_session_cannot_read_it(weather) -> None:
    async with Env(weather.url) as a, Env(weather.url) as b:
        first = await a.reset(episode_id="py-owned")
        await a.step("get_weather", {"city": "Paris"})
        with pytest.raises(EpisodeExists):
            await b.reset(episode_id="py-owned")
        await b.reset()
        with pytest.raises(UnknownEpisode):
            await b.rewards(first.episode_id)
        assert (await a.state()).step_count == 1


def test_gym_wrapper_without_gymnasium_keeps_its_spaces(weather) -> None:
    # A fresh interpreter where gymnasium cannot be imported: the same shapes, the same spaces.
    probe = f"""
import sys
sys.modules["gymnasium"] = None
from agentic_rl.gym import GymEnv
gym = GymEnv({weather.url!r})
gym.action_space.seed(3)
name, params = gym.action_space.sample()
assert (name, params) == ("get_weather", {{"city": ""}}), (name, params)
assert gym.action_space.contains(("get_weather", {{"city": "Oslo"}})) and gym.observation_space.contains({{"a": [1]}})
obs, info = gym.reset(seed=1)
print(info["actions"])
gym.close()
"""
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['get_weather']"
