"""The Python examples at their smallest size (each skipped, saying why, where torch or TRL cannot be installed)."""
from __future__ import annotations

import asyncio
import importlib.util
import json
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


def test_grpo_tools_warm_start_finds_the_band_inside_a_cliff(capsys: pytest.CaptureFixture[str]) -> None:
    """Greedy success jumps from near 0 to past the band within one supervised step: the bisection
    between the weights before and after that step finds a point in the band, or the last below it."""
    pytest.importorskip("torch", reason="torch is not installed: pip install -r examples/python/requirements.txt")
    pytest.importorskip("transformers", reason="transformers is not installed: pip install -r examples/python/requirements.txt")
    grpo = load("grpo_tools")
    probed: list = []

    def cliff(edge: float, width: float):
        async def probe(t: float) -> float:
            probed.append(t)
            return 0.02 if t < edge else 0.15 if t < edge + width else 0.55
        return probe

    assert asyncio.run(grpo.find_band(cliff(0.3, 0.02), 0.1, 0.2, 8)) == 0.15
    assert 0.3 <= probed[-1] < 0.32 and len(probed) <= 8
    probed.clear()
    # A band narrower than 2^-6 of the segment: the last point below the cliff, probed again to set its weights.
    assert asyncio.run(grpo.find_band(cliff(0.3, 0.001), 0.1, 0.2, 6)) == 0.02
    assert len(probed) == 7 and probed[-1] < 0.3 and 0.3 - probed[-1] < 2 ** -6
    # An empty band, or a probe every 0 steps, is refused before anything starts, naming the flag.
    for bad, flag in ((["--warm-until", "0.3", "--warm-below", "0.2"], "--warm-below"), (["--probe-every", "0"], "--probe-every"), (["--warm-tasks", "8"], "--warm-tasks")):
        with pytest.raises(SystemExit):
            grpo.parse_args(bad)
        assert flag in capsys.readouterr().err


def test_grpo_tools_suite_keeps_the_warm_start_off_grpos_tasks(tmp_path: Path) -> None:
    """The warm start's gold episodes share no key and no code with GRPO's pool or the held-out tasks, and its size moves neither."""
    pytest.importorskip("torch", reason="torch is not installed: pip install -r examples/python/requirements.txt")
    grpo = load("grpo_tools")

    def splits(folder: Path, warm: int) -> dict:
        grpo.write_suite(folder, 7, 100, 20, warm)
        read = lambda split: [json.loads(line) for line in (folder / "tasks" / f"{split}.jsonl").read_text().splitlines()]  # noqa: E731
        return {split: [(t["actions"][0]["params"]["key"], t["actions"][1]["params"]["code"]) for t in read(split)] for split in ("warm", "train", "test")}

    small, large = splits(tmp_path / "a", 50), splits(tmp_path / "b", 300)
    assert [len(small[s]) for s in ("warm", "train", "test")] == [50, 100, 20]
    warm_keys = {k for k, _ in large["warm"]}
    assert not warm_keys & {k for k, _ in large["train"] + large["test"]}
    assert small["train"] == large["train"] and small["test"] == large["test"]
    assert large["warm"][:50] == small["warm"]
    with pytest.raises(SystemExit, match="--warm-tasks"):
        grpo.write_suite(tmp_path / "c", 7, 1500, 50, 500)


def test_grpo_tools_closes_the_training_loop_on_a_tiny_model(tmp_path: Path) -> None:
    """The whole loop at its smallest size: gold warm start, then GRPO through agent serve's rollouts, weights pushed each step."""
    pytest.importorskip("torch", reason="torch is not installed: pip install -r examples/python/requirements.txt")
    pytest.importorskip("transformers", reason="transformers is not installed: pip install -r examples/python/requirements.txt")
    pytest.importorskip("safetensors", reason="safetensors is not installed: pip install -r examples/python/requirements.txt")
    grpo = load("grpo_tools")
    seen: list = []
    original = grpo.Trainer.grpo_step

    def spy(self, groups):  # what the trainer was given, checked below by counts
        seen.append(groups)
        return original(self, groups)

    grpo.Trainer.grpo_step = spy
    try:
        metrics = grpo.main(["--train-tasks", "200", "--test-tasks", "16", "--warm-tasks", "200", "--sft-window-steps", "400", "--sft-steps", "40", "--warm-until", "0", "--filter", "none", "--steps", "3",
                             "--tasks-per-step", "4", "--group-size", "4", "--eval-every", "3", "--metrics", str(tmp_path / "m.jsonl"), "--quiet"])
    finally:
        grpo.Trainer.grpo_step = original
    lines = [json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert lines == metrics[:-1]
    assert [m["phase"] for m in lines] == ["start", "sft", "grpo", "grpo", "grpo"]
    versions = [m["weight_version"] for m in lines]
    assert versions == sorted(versions) and len(set(versions)) == len(versions)
    assert len(seen) == 3
    for groups in seen:
        assert len(groups) == 4
        for g in groups:
            assert len(g.records) == 4 and len({r["group_id"] for r in g.records}) == 1
            assert g.staleness is not None and g.staleness <= 1
            for r in g.records:
                assert all(isinstance(t.get("weight_version"), int) for t in r["turns"])
                generated = [any(t["start"] <= i < t["end"] for t in r["turns"]) for i in range(len(r["input_ids"]))]
                assert r["loss_mask"] == [1 if g_ else 0 for g_ in generated]
    assert all(m["staleness"] <= 1 for m in lines if m["phase"] == "grpo")
    # Held-out tasks (keys and codes never trained on): the untrained model fails them; after the steps it does not.
    assert lines[0]["eval_success"] == 0.0
    assert lines[-1]["eval_success"] > lines[0]["eval_success"], lines
    summary = metrics[-1]["summary"]
    assert 0 <= summary["waited_share"] <= 1



def test_the_documented_loop_runs_as_written(tmp_path_factory: pytest.TempPathFactory) -> None:
    """docs/how-to/train-loop.md's 30-line loop, against the tiny model server and agent serve of fixtures/lookup (one step, K = 2)."""
    pytest.importorskip("torch", reason="torch is not installed: pip install -r examples/python/requirements.txt")
    pytest.importorskip("safetensors", reason="safetensors is not installed: pip install -r examples/python/requirements.txt")
    import re
    import subprocess

    body = re.search(r"## The loop in 30 lines.*?```python\n(.*?)```", (REPO / "docs" / "how-to" / "train-loop.md").read_text(), flags=re.S)
    assert body, "docs/how-to/train-loop.md has no loop block"
    code = body.group(1)
    assert len(code.strip().splitlines()) <= 40
    model = subprocess.Popen([sys.executable, str(EXAMPLES / "tiny_vllm_server.py"), "--port", "0"], stdout=subprocess.PIPE, text=True)
    served = None
    try:
        assert model.stdout is not None
        model_url = model.stdout.readline().split()[1]
        # As the page says: the serve process is told its inference server when it starts.
        served = Served("fixtures/lookup", tmp_path_factory.mktemp("runs"), "--split", "train,test", "--llm-base-url", f"{model_url}/v1")
        # In this checkout the examples are not under node_modules.
        code = code.replace("node_modules/agentic-rl-toolkit/examples/python", str(EXAMPLES)).replace("http://127.0.0.1:8001", model_url).replace("http://127.0.0.1:8000", served.url).replace(", 10, 8", ", 1, 2")
        done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        # The loop pushed its weights: the server generates with version 1 now.
        import urllib.request

        with urllib.request.urlopen(f"{model_url}/v1/models") as res:
            assert json.load(res)["data"][0]["weight_version"] == 1
    finally:
        if served is not None:
            served.stop()
        model.terminate()
        model.wait(timeout=30)
