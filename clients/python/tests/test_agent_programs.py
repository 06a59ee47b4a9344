"""Agent programs written in Python against their SDKs' public APIs (examples/agents/openai_tools.py on
the `openai` package, anthropic_tools.py on the `anthropic` package; the env's tools over MCP by hand),
trained as they are: `agent benchmark --policy cmd:'python …' --tokens` runs the lookup suite against
the tiny vLLM-compatible server, and every exported turn must be exactly a completion the server
logged (its prompt the sequence before it, its ids and logprobs the server's), the mask 1 on exactly
those ids, the answer's turn rewarded. Both SDKs' conversations give the same records."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import start_tiny_server

REPO = Path(__file__).resolve().parents[3]
AGENTS = REPO / "examples" / "agents"

SCRIPT = [
    # The first turn: look up the key the task asks about.
    {"match": r"key '([a-z]+-[a-z]+)'(?:(?!<tool_response>).)*<\|im_start\|>assistant\n$",
     "text": '<tool_call>\n{"name": "lookup_code", "arguments": {"key": "\\1"}}\n</tool_call>'},
    # After a lookup: answer with its code.
    {"match": r'"code":"(\w+)"\}\n</tool_response><\|im_end\|>\n<\|im_start\|>assistant\n$',
     "text": 'Found it.\n<tool_call>\n{"name": "answer", "arguments": {"code": "\\1"}}\n</tool_call>'},
]


@pytest.fixture(scope="module")
def tiny_server(tmp_path_factory: pytest.TempPathFactory):
    yield from start_tiny_server(tmp_path_factory.mktemp("tiny-programs"), SCRIPT)


def agent(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["node", str(REPO / "bin" / "agent.js"), *args], cwd=REPO, capture_output=True, text=True, timeout=300)


def test_python_programs_are_trained_as_they_are(tiny_server, tmp_path: Path) -> None:
    pytest.importorskip("openai", reason="the openai package is not installed: pip install openai")
    pytest.importorskip("anthropic", reason="the anthropic package is not installed: pip install anthropic")
    sequences = []
    for program in ("openai_tools.py", "anthropic_tools.py"):
        out = tmp_path / program
        bench = agent("benchmark", "fixtures/lookup", "--policy", f"cmd:{sys.executable} {AGENTS / program}", "--llm-base-url", f"{tiny_server['url']}/v1", "--tokens",
                      "--max-tokens", "48", "--tasks", "lookup-test-0", "--trials", "1", "--seed", "5", "--out", str(out), "--json")
        assert bench.returncode == 0, bench.stderr
        report = json.loads(bench.stdout)
        assert report["metrics"]["success_rate"]["value"] == 1, program
        assert agent("export", report["run_dir"], "--format", "tokens", "--out", str(out / "t.jsonl")).returncode == 0
        [record] = [json.loads(line) for line in (out / "t.jsonl").read_text().splitlines()]
        completions = [json.loads(line) for line in tiny_server["log"].read_text().splitlines()]
        ids, mask, logprobs = record["input_ids"], record["loss_mask"], record["logprobs"]
        assert len(record["turns"]) == 2
        for t in record["turns"]:
            start, end = t["start"], t["end"]
            produced = any(c["prompt_token_ids"] == ids[:start] and c["token_ids"] == ids[start:end] and c["logprobs"] == logprobs[start:end] for c in completions)
            assert produced, f"{program}: the turn at {start} is not a completion the server produced"
        in_turn = [any(t["start"] <= i < t["end"] for t in record["turns"]) for i in range(len(ids))]
        assert mask == [1 if x else 0 for x in in_turn]
        assert [t["reward"] for t in record["turns"]] == [0, 2]
        sequences.append((ids, mask))
    # The same conversation through either SDK's API is the same sequence.
    assert sequences[0] == sequences[1]


async def test_a_trainer_asks_for_rollouts_of_a_program(tiny_server, tmp_path: Path) -> None:
    from agentic_rl import Env, InvalidAction

    from .conftest import Served

    served = Served("fixtures/lookup", tmp_path, "--split", "train", "--allow-agent-programs", "--llm-base-url", f"{tiny_server['url']}/v1")
    try:
        async with Env(served.url) as env:
            # A bad request is raised by the call itself, before any episode runs.
            with pytest.raises(InvalidAction, match="/data/task_ids/0"):
                await env.rollouts(["no-such-task"], n=1, base_url=f"{tiny_server['url']}/v1", model="tiny-qwen")
            stream = await env.rollouts(["lookup-train-0"], n=2, base_url=f"{tiny_server['url']}/v1", model="tiny-qwen", sampling={"max_tokens": 48},
                                        agent=[sys.executable, str(AGENTS / "openai_tools.py")])
            groups = [group async for group in stream]
            # Bounded by the request: its second model call is refused, the episode truncated.
            bounded = await env.rollouts(["lookup-train-0"], n=1, base_url=f"{tiny_server['url']}/v1", model="tiny-qwen", sampling={"max_tokens": 48},
                                         agent={"command": [sys.executable, str(AGENTS / "openai_tools.py")], "max_turns": 1})
            [capped] = [group async for group in bounded]
            # Dynamic sampling: the scripted model solves every task, so every group is all 1s and left out; the request ends short.
            drawn = await env.rollouts(["lookup-train-0", "lookup-train-1"], n=2, base_url=None, model="tiny-qwen", sampling={"max_tokens": 48},
                                       groups=1, max_tries=2, filter="zero_variance", sampler="difficulty", staleness_from="newest")
            assert [group async for group in drawn] == []
        assert [(r["reason"], r["truncated"], len(r["turns"])) for r in capped.records] == [("max_turns", True, 1)]
        assert drawn.summary is not None and (drawn.summary.groups, drawn.summary.tried, drawn.summary.filtered) == (0, 2, {"zero_variance": 2, "reward_range": 0})
        assert drawn.accepted == {"tasks": 2, "groups": 1, "episodes": 2}
        assert stream.summary is not None and stream.summary.groups == 1 and stream.accepted == {"tasks": 1, "groups": 1, "episodes": 2}
        [group] = groups
        assert [r["trial"] for r in group.records] == [0, 1]
        completions = [json.loads(line) for line in tiny_server["log"].read_text().splitlines()]
        for record in group.records:
            ids = record["input_ids"]
            assert [t["reward"] for t in record["turns"]] == [0, 1]
            for t in record["turns"]:
                assert any(c["prompt_token_ids"] == ids[: t["start"]] and c["token_ids"] == ids[t["start"]: t["end"]] for c in completions)
    finally:
        served.stop()
