"""The Python examples at their smallest size (each skipped, saying why, where torch or TRL cannot be installed)."""
from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path

import pytest

from .conftest import REPO, Served

EXAMPLES = REPO / "examples" / "python"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def signal_game(tmp_path_factory: pytest.TempPathFactory):
    served = Served("fixtures/signal-game", tmp_path_factory.mktemp("runs"))
    yield served
    served.stop()


def test_reinforce_learns_from_the_judges_late_verdicts(signal_game, tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="torch is not installed: pip install torch matplotlib to run the REINFORCE example")
    reinforce = load("reinforce")
    # Each episode's verdict is matched to its answer step by trace id inside play(); a wrong step would hang or assert.
    curve = asyncio.run(reinforce.train(signal_game.url, sessions=16, max_batches=12, target=0.9, lr=0.2, seed=0, token=None))
    assert all(0.0 <= c <= 1.0 for c in curve)
    assert max(curve[-3:]) > curve[0], f"no learning: {curve}"


def test_trl_grpo_trainer_optimises_on_the_envs_rewards(signal_game, tmp_path: Path) -> None:
    pytest.importorskip("trl", reason="TRL is not installed: pip install trl torch to run the GRPO example")
    grpo = load("grpo_trl")
    logged = grpo.train(signal_game.url, steps=2, output_dir=str(tmp_path))
    assert [entry["step"] for entry in logged] == [1, 2]
    # The rollouts were episodes of the served env: their steps are in its run folder.
    import json

    actions = [json.loads(line)["action"] for line in (signal_game.dir / "trajectories.jsonl").read_text().splitlines()]
    assert actions.count("look") >= 16
