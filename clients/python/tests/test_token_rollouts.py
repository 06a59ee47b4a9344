"""Token-exact rollouts against a real (tiny) model: examples/python/tiny_vllm_server.py serves a
transformers causal LM built from a config with a Hugging Face tokenizer and chat template made on
the spot; `agent benchmark --tokens` runs the lookup suite against it, and every exported turn must
be exactly a completion the server logged: its prompt the sequence before it, its ids and logprobs
the server's, its mask 1 on exactly those ids. Some turns are scripted (so that tool calls happen
on a random model), one task's are sampled freely."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import start_tiny_server

REPO = Path(__file__).resolve().parents[3]
SERVER = REPO / "examples" / "python" / "tiny_vllm_server.py"

SCRIPT = [
    # The first turn of the tasks about these two keys: look the key up.
    {"match": r"key '((?:frost-ram|coral-eel))'(?:(?!<tool_response>).)*<\|im_start\|>assistant\n$",
     "text": '<tool_call>\n{"name": "lookup_code", "arguments": {"key": "\\1"}}\n</tool_call>'},
    # After a lookup: answer with its code.
    {"match": r'"code":"(\w+)"\}\n</tool_response><\|im_end\|>\n<\|im_start\|>assistant\n$',
     "text": 'Found it.\n<tool_call>\n{"name": "answer", "arguments": {"code": "\\1"}}\n</tool_call>'},
]


@pytest.fixture(scope="module")
def tiny_server(tmp_path_factory: pytest.TempPathFactory):
    yield from start_tiny_server(tmp_path_factory.mktemp("tiny"), SCRIPT)


def agent(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["node", str(REPO / "bin" / "agent.js"), *args], cwd=REPO, capture_output=True, text=True, timeout=300)


def test_exported_tokens_are_exactly_what_the_server_produced(tiny_server, tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is not installed: pip install pyarrow")
    import numpy as np

    bench = agent("benchmark", "fixtures/lookup", "--policy", "llm:tiny-qwen", "--llm-base-url", f"{tiny_server['url']}/v1", "--tokens",
                  "--max-tokens", "48", "--tasks", "lookup-test-0,lookup-test-1,lookup-test-2", "--trials", "2", "--out", str(tmp_path), "--json")
    assert bench.returncode == 0, bench.stderr
    report = json.loads(bench.stdout)
    run = report["run_dir"]
    assert agent("export", run, "--format", "tokens", "--out", str(tmp_path / "t.jsonl")).returncode == 0
    assert agent("export", run, "--format", "tokens", "--out", str(tmp_path / "t.parquet")).returncode == 0
    records = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    table = pq.read_table(tmp_path / "t.parquet")
    assert str(table.schema.field("input_ids").type) == "list<element: int32 not null>"
    assert str(table.schema.field("logprobs").type) == "list<element: float>"
    # The first completion is the client's start-up check of the server.
    completions = [json.loads(line) for line in tiny_server["log"].read_text().splitlines()][1:]
    assert len(records) == 6
    used: set[int] = set()
    for r, row in zip(records, table.to_pylist()):
        ids, mask, logprobs = r["input_ids"], r["loss_mask"], r["logprobs"]
        assert len(ids) == len(mask) == len(logprobs)
        assert row["input_ids"] == ids and row["loss_mask"] == mask
        in_turn = [False] * len(ids)
        for t in r["turns"]:
            k = next(i for i, c in enumerate(completions) if i not in used and c["prompt_token_ids"] == ids[: t["start"]]
                     and c["token_ids"] == ids[t["start"]: t["end"]] and c["logprobs"] == logprobs[t["start"]: t["end"]])
            used.add(k)
            # Parquet keeps the logprobs as float32: exactly the server's, rounded once.
            assert row["logprobs"][t["start"]: t["end"]] == [float(np.float32(x)) for x in completions[k]["logprobs"]]
            for i in range(t["start"], t["end"]):
                in_turn[i] = True
        assert mask == [1 if x else 0 for x in in_turn]
        assert all((lp is None) == (not x) for lp, x in zip(logprobs, in_turn))
    assert len(used) == len(completions)
    by_task = {r["task_id"]: r for r in records}
    # Scripted: a lookup, then the answer the judge rewards late, on the answer's turn (plus the benchmark's success).
    assert [t["reward"] for t in by_task["lookup-test-0"]["turns"]] == [0, 2]
    assert by_task["lookup-test-0"]["success"] is True and by_task["lookup-test-1"]["success"] is True
    # Sampled freely from a random model: no valid call, and no success.
    assert by_task["lookup-test-2"]["success"] is False
    assert {r["group_id"] for r in records} == {"lookup-test-0", "lookup-test-1", "lookup-test-2"}


def test_weight_updates_go_forward_only_and_a_bad_file_changes_nothing(tiny_server, tmp_path: Path) -> None:
    """POST /update_weights: a safetensors state dict loads as the new version; an older version or a file that does not fit the model is refused."""
    safetensors = pytest.importorskip("safetensors.torch", reason="safetensors is not installed: pip install safetensors")
    import urllib.error
    import urllib.request

    sys.path.insert(0, str(SERVER.parent))
    import tiny_vllm_server as tiny

    url = tiny_server["url"]

    def post(route: str, body: dict) -> tuple[int, dict]:
        req = urllib.request.Request(url + route, data=json.dumps(body).encode(), headers={"content-type": "application/json"})
        try:
            with urllib.request.urlopen(req) as res:
                return res.status, json.load(res)
        except urllib.error.HTTPError as err:
            return err.code, json.load(err)

    def version() -> int:
        with urllib.request.urlopen(url + "/v1/models") as res:
            return json.load(res)["data"][0]["weight_version"]

    # The server's own weights (same seed and size): loading them changes nothing the other tests see.
    model = tiny.build_model(len(tiny.build_tokenizer()), 4096, 0)
    good = tmp_path / "w.safetensors"
    safetensors.save_file({k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}, str(good))
    before = version()
    assert post("/update_weights", {"path": str(good), "version": before + 1}) == (200, {"weight_version": before + 1})
    status, body = post("/update_weights", {"path": str(good), "version": before})
    assert status == 409 and "not above the current" in body["error"]["message"]
    bad = tmp_path / "bad.safetensors"
    safetensors.save_file({"not.a.weight": model.lm_head.weight.detach().clone()}, str(bad))
    status, body = post("/update_weights", {"path": str(bad), "version": before + 5})
    assert status == 400 and "does not fit the model" in body["error"]["message"]
    assert version() == before + 1
    status, body = post("/v1/completions", {"prompt": [], "max_tokens": 2})
    assert status == 400 and "cannot be empty" in body["error"]["message"]
    ids = post("/tokenize", {"prompt": "hello"})[1]["tokens"]
    assert post("/v1/completions", {"prompt": ids, "max_tokens": 2, "return_token_ids": True, "logprobs": 1})[1]["weight_version"] == before + 1


def test_a_batch_sharing_a_prefix_gets_the_models_own_logprobs() -> None:
    """The tiny server computes a batch's shared prefix once: each row's ids and logprobs are still what the model gives the whole sequence."""
    torch = pytest.importorskip("torch", reason="torch is not installed: pip install -r examples/python/requirements.txt")
    pytest.importorskip("transformers", reason="transformers is not installed: pip install -r examples/python/requirements.txt")
    import argparse
    import random

    sys.path.insert(0, str(SERVER.parent))
    import tiny_vllm_server as tiny

    engine = tiny.Engine(argparse.Namespace(model="tiny", max_model_len=4096, seed=7, hidden_size=64, layers=2, heads=4, script=None, log=None, max_batch=8))
    rng = random.Random(7)
    vocab = len(engine.tokenizer)
    prefix = [rng.randrange(3, vocab - 10) for _ in range(60)]
    prompts = [prefix + [rng.randrange(3, vocab - 10) for _ in range(rng.randrange(1, 12))] for _ in range(6)]
    jobs = [tiny.Job(p, 8, 0.0 if i % 2 else 0.8, 1.0, torch.Generator().manual_seed(i), None) for i, p in enumerate(prompts)]
    engine.generate(jobs)
    with torch.no_grad():
        for job in jobs:
            ids, out = job.result["prompt_token_ids"], job.result["token_ids"]
            assert ids == job.prompt and len(out) >= 1
            logits = engine.model(torch.tensor([ids + out])).logits[0, len(ids) - 1: -1].float()
            expected = torch.log_softmax(logits, -1).gather(-1, torch.tensor(out)[:, None])[:, 0]
            assert torch.allclose(torch.tensor(job.result["logprobs"]), expected, atol=1e-4), (job.result["logprobs"], expected.tolist())
            if job.temperature == 0:
                assert out == [int(i) for i in logits.argmax(-1)]
