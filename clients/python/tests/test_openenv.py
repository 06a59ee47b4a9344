"""OpenEnv's own client (not ours), unmodified, against `agent serve`: τ-bench airline's gold actions
over /ws reach the gold final states, as `agent benchmark --policy gold` computes them.

Needs openenv-core (`pip install openenv-core`); skipped with that message where it cannot be installed.
"""
from __future__ import annotations

import asyncio
import copy
import json
import subprocess
from pathlib import Path
from typing import Any, Dict, List

import pytest

from .conftest import REPO, tasks

openenv = pytest.importorskip("openenv.core", reason="OpenEnv's client is not installed: pip install openenv-core to run this check")


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def apply_patch(doc: Any, patch: List[Dict[str, Any]]) -> Any:
    """RFC 6902 add / remove / replace: what a run's final_patch holds."""
    doc = copy.deepcopy(doc)
    for op in patch:
        path = [_unescape(t) for t in op["path"].split("/")[1:]]
        if not path:
            doc = op.get("value")
            continue
        parent = doc
        for token in path[:-1]:
            parent = parent[int(token)] if isinstance(parent, list) else parent[token]
        last = path[-1]
        if isinstance(parent, list):
            index = len(parent) if last == "-" else int(last)
            if op["op"] == "add":
                parent.insert(index, op["value"])
            elif op["op"] == "remove":
                parent.pop(index)
            else:
                parent[index] = op["value"]
        elif op["op"] == "remove":
            del parent[last]
        else:
            parent[last] = op["value"]
    return doc


def gold_final_states(ids: List[str], out: Path) -> Dict[str, Any]:
    """The gold final state of each task: `agent benchmark --policy gold`'s episodes, rebuilt from its run folder."""
    subprocess.run(["node", str(REPO / "bin" / "agent.js"), "benchmark", "tau-bench/airline", "--policy", "gold", "--tasks", ",".join(ids), "--out", str(out), "--json"], cwd=REPO, check=True, capture_output=True)
    run = next(p for p in out.iterdir() if (p / "episodes.jsonl").exists())
    states = {r["state_id"]: r["state"] for r in map(json.loads, (run / "states.jsonl").read_text().splitlines())}
    finals = {}
    for e in map(json.loads, (run / "episodes.jsonl").read_text().splitlines()):
        finals[ids[e["episode"]]] = apply_patch(states[e["initial_state_id"]], e["final_patch"])
    return finals


def test_openenv_client_runs_tau_bench_gold_actions(airline, tmp_path) -> None:
    from openenv.core import GenericEnvClient

    all_tasks = tasks("tau-bench/airline")
    ids = [t["id"] for t in all_tasks]
    gold = gold_final_states(ids, tmp_path)

    async def run(task: Dict[str, Any]) -> Any:
        async with GenericEnvClient(base_url=airline.url) as env:
            reset = await env.reset(task_id=task["id"])
            assert reset.observation["task_id"] == task["id"] and not reset.done
            for action in task["actions"]:
                result = await env.step(action)
                assert result.observation.get("error") is None, result.observation
            state = await env.state()
            assert state["step_count"] == len(task["actions"]) and state["episode_id"]
            return state["state"]

    mismatched = [t["id"] for t in all_tasks if asyncio.run(run(t)) != gold[t["id"]]]
    assert mismatched == [], f"final state differs from the gold's for {mismatched}"
