"""`agent export` read back by the readers trainers use: pyarrow, 🤗 datasets, polars.

Each column has one type whatever the env; what varies by tool is JSON text decoded exactly once;
two envs' exports concatenate. Skipped, saying why, where those readers cannot be installed.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from .conftest import REPO

pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is not installed: pip install pyarrow datasets polars to check the exports")
datasets = pytest.importorskip("datasets", reason="datasets is not installed: pip install datasets")
pl = pytest.importorskip("polars", reason="polars is not installed: pip install polars")


def agent(*args: str) -> str:
    return subprocess.run(["node", str(REPO / "bin" / "agent.js"), *args], cwd=REPO, check=True, capture_output=True, text=True).stdout


def export(env: str, out: Path) -> Path:
    runs = out / "runs"
    agent("run", env, "--episodes", "3", "--max-steps", "3", "--tool-option", "latency_scale=0.01", "--out", str(runs))
    run = next(runs.iterdir())
    file = out / f"{run.name}.parquet"
    agent("export", str(run), "--format", "parquet", "--out", str(file))
    return file


def test_parquet_loads_as_typed_columns_and_two_envs_concatenate(tmp_path: Path) -> None:
    weather = export("fixtures/weather", tmp_path / "w")
    game = export("fixtures/signal-game", tmp_path / "g")

    table = pq.read_table(weather)
    assert str(table.schema.field("params_json").type) == "string"
    assert str(table.schema.field("reward").type) == "double"
    rows = table.to_pylist()
    # Decoded once: a dict, not a JSON string of a JSON string.
    assert all(isinstance(json.loads(r["params_json"]), dict) for r in rows)
    assert all(r["error_code"] is None for r in rows if r["status"] == "resolved")
    assert all(r["state_json"] is None for r in rows)

    ds = datasets.load_dataset("parquet", data_files={"train": [str(weather)]})["train"]
    assert isinstance(json.loads(ds[0]["rewards_json"]), dict)
    both = datasets.concatenate_datasets([ds, datasets.load_dataset("parquet", data_files={"train": [str(game)]})["train"]])
    assert len(both) == len(rows) + pq.read_table(game).num_rows

    frame = pl.read_parquet(weather)
    assert frame.schema["params_json"] == pl.Utf8 and frame.schema["episode"] == pl.Int32
    assert frame["params_json"].str.json_decode().dtype.base_type() == pl.Struct


def test_chat_export_loads_as_a_conversational_dataset(tmp_path: Path) -> None:
    data_utils = pytest.importorskip("trl.data_utils", reason="TRL is not installed: pip install trl")
    report = json.loads(agent("benchmark", "tau-bench/airline", "--policy", "gold", "--tasks", "airline-test-0,airline-test-1,airline-test-12", "--out", str(tmp_path / "runs"), "--format", "json"))
    file = tmp_path / "chat.jsonl"
    agent("export", report["run_dir"], "--format", "chat", "--out", str(file))
    ds = datasets.load_dataset("json", data_files={"train": [str(file)]})["train"]
    assert len(ds) == 3 and ds[0]["success"] is True and ds[0]["task_id"] == "airline-test-0"
    for example in ds:
        assert data_utils.is_conversational(example)
        calls = [c["id"] for m in example["messages"] if m.get("tool_calls") for c in m["tool_calls"]]
        answers = [m["tool_call_id"] for m in example["messages"] if m["role"] == "tool"]
        assert calls == answers
        assert all(isinstance(json.loads(c["function"]["arguments"]), dict) for m in example["messages"] if m.get("tool_calls") for c in m["tool_calls"])


def test_chat_parquet_is_nested_and_tools_decode_once(tmp_path: Path) -> None:
    data_utils = pytest.importorskip("trl.data_utils", reason="TRL is not installed: pip install trl")
    report = json.loads(agent("benchmark", "tau-bench/retail", "--policy", "gold", "--tasks", "retail-test-2,retail-test-5", "--out", str(tmp_path / "runs"), "--format", "json"))
    file = tmp_path / "chat.parquet"
    agent("export", report["run_dir"], "--format", "chat-parquet", "--out", str(file))
    ds = datasets.load_dataset("parquet", data_files={"train": [str(file)]})["train"]
    assert [e["task_id"] for e in ds] == ["retail-test-2", "retail-test-5"] and all(ds["success"])
    for example in ds:
        assert data_utils.is_conversational(example)
        # Each tool keeps its own parameters: tools is JSON text (TRL's SFTTrainer decodes it), not a merged struct.
        tools = json.loads(example["tools"])
        by_name = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
        assert set(by_name["cancel_pending_order"]["properties"]) == {"order_id", "reason"}
        calls = [c["id"] for m in example["messages"] if m["tool_calls"] for c in m["tool_calls"]]
        assert calls == [m["tool_call_id"] for m in example["messages"] if m["role"] == "tool"]
    assert pl.read_parquet(file).schema["messages"].base_type() == pl.List


def test_verl_dataset_reads_as_verl_reads_it(tmp_path: Path) -> None:
    """What verl's RLHFDataset.__getitem__ and its tool agent take from a row (verl itself is not on the index)."""
    file = tmp_path / "airline.parquet"
    agent("export", "tau-bench/airline", "--format", "verl", "--out", str(file))
    ds = datasets.load_dataset("parquet", data_files={"train": [str(file)]})["train"]
    assert len(ds) == 50
    row = ds[3]
    messages = row["prompt"]  # RLHFDataset: prompt_key "prompt", a list of chat messages
    assert [m["role"] for m in messages] == ["system", "user"] and "airline" in messages[0]["content"].lower()
    extra = row["extra_info"]
    assert extra["index"] == 3 and extra["task_id"] == "airline-test-3"
    # ToolAgentLoop._call_tool: tools_kwargs.get(tool_name, {}).get("create_kwargs", {})
    assert extra["tools_kwargs"].get("get_reservation_details", {}).get("create_kwargs", {}) == {"task_id": "airline-test-3"}
    assert extra["interaction_kwargs"]["name"] == "agentic_rl"
    assert row["agent_name"] == "tool_agent" and row["reward_model"]["style"] == "rule"
    assert json.loads(row["reward_model"]["ground_truth"])["actions"]
