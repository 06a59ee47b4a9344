"""GymEnv as a real gymnasium.Env: spaces, the initial observation, typed errors, and gymnasium's own checker."""
from __future__ import annotations

import pytest

gymnasium = pytest.importorskip("gymnasium")

from gymnasium.utils.env_checker import check_env  # noqa: E402

from agentic_rl import GymEnv, InvalidAction  # noqa: E402
from agentic_rl.gym import JsonSpace, ToolCallSpace  # noqa: E402


def test_gym_env_is_a_gymnasium_env_with_spaces_that_say_what_they_can(weather) -> None:
    env = GymEnv(weather.url)
    try:
        assert isinstance(env, gymnasium.Env)
        assert isinstance(env.action_space, ToolCallSpace) and isinstance(env.observation_space, JsonSpace)
        assert ("get_weather", {"city": "Paris"}) in env.action_space
        assert {"name": "get_weather", "params": {}} in env.action_space
        assert ("teleport", {}) not in env.action_space and "nonsense" not in env.action_space
        obs, info = env.reset(seed=3)
        assert obs in env.observation_space and obs == env.client.state().state
        assert env.action_space.sample() == ("get_weather", {"city": ""})
        obs, reward, terminated, truncated, info = env.step(("get_weather", {"city": "Oslo"}))
        assert obs["city"] == "Oslo" and not terminated and not truncated
        with pytest.raises(InvalidAction) as bad:
            env.step(("get_weather", "Oslo"))  # type: ignore[arg-type]
        assert bad.value.pointer == "/1"
    finally:
        env.close()


def test_gymnasiums_own_checker_passes(weather) -> None:
    env = GymEnv(weather.url)
    try:
        check_env(env, skip_render_check=True)
    finally:
        env.close()
