"""GRPO through the runtime: a tiny causal LM learns multi-turn tool use on two CPU cores.

The task (fixtures/lookup, its tasks drawn from --seed): the user names a key; the model must call
`lookup_code` with that key, read the code in the tool's result, and call `answer` with it. A
judge's verdict (1 or 0) lands on the answer step ~200 ms later. Success needs the tool call and
its result: the codes are random, and neither GRPO's tasks nor the held-out ones share a key or a
code with the warm start's gold episodes (a split of their own).

The loop, as prime-rl, AReaL or verl's agent loop run it, with our runtime as the environment side:

1. The trainer asks `agent serve` for rollouts: T groups of K episodes, their tasks drawn from the
   train split by the server (each task once before any twice; --sampler difficulty: by its
   curriculum, the tasks the policy is undecided on first), run by the suite's `llm:` agent in
   token mode against the inference server (examples/python/tiny_vllm_server.py); with --filter
   zero_variance a group whose K rewards are all equal (nothing for GRPO to learn) is replaced by
   another draw. Each group comes back as token records (`input_ids`, `loss_mask`, `logprobs`,
   `turns`, `reward`) as soon as its K episodes are over and their late rewards have landed.
2. While the next batch is already rolling, the trainer computes group-relative advantages and
   takes --epochs clipped policy-gradient steps on the batch (importance ratio against the exported
   sampler logprobs, each episode's mean over its generated tokens, loss only where `loss_mask` is
   1), writes the weights, pushes them to the inference server
   (`POST /update_weights`) and tells `agent serve` the new version. A group whose oldest turn is
   more than --max-staleness versions behind is re-run by the server, never mixed in silently.
3. Before GRPO, an optional supervised warm start on gold episodes rendered token-exact through the
   server's template (`agent benchmark --policy gold --tokens`, `agent export --format tokens`):
   first on each generated turn with the 40 ids before it (where the key or the code it must
   copy is), then on the whole sequences, ~550 ids with the tool list. The whole-sequence phase
   ends as soon as the greedy policy solves a share of --probe-tasks train tasks in
   [--warm-until, --warm-below) (0.1 to 0.2 by default; probed every --probe-every steps once the
   loss is low); a probe past the band bisects the weights between the last probe below it and
   these, and stops at the first point in the band (greedy success is a cliff). The warm start
   only makes sampled groups differ now and then; the learning is left to GRPO, which runs for at
   most --max-minutes of wall time (15), warm start included.

The model is a Qwen2 built from a config (no download) with a byte-level BPE tokenizer made on the
spot and a Qwen2.5-style chat template, the server's own (imported from tiny_vllm_server.py, same
seed: the trainer and the server start from the same weights, version 0).

    python examples/python/grpo_tools.py --metrics metrics.jsonl --plot curve.png

With no URLs it starts the model server and `agent serve` from this checkout, and stops them at the
end; --model-url and --serve-url point it at running ones (serve a suite made by --write-suite,
with --llm-base-url <model-url>/v1: the inference server its rollouts may call).
--metrics writes one JSON line per training step: step, phase, weight_version, train_success,
eval_success (held-out tasks, greedy), mean_reward, staleness, groups, tried and filtered (the groups
the server ran for the batch, and those it left out), elapsed_s.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Dict, Iterator, List, Optional, Tuple

import torch

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))

import tiny_vllm_server as tiny  # noqa: E402 - the server's own model and tokenizer builders

from agentic_rl import Env, RolloutGroup, RolloutSummary  # noqa: E402

ADJECTIVES = "amber brisk coral dusky ember frost gilded hazel ivory jade keen lunar misty noble olive pale quiet rusty silver tidal".split()
ANIMALS = "fox owl elk ram yak cod bee jay ant eel".split()
LETTERS, DIGITS = "ABCDEFGHJKLMNPQRSTUVWXYZ", "23456789"
MODEL = "tiny-qwen"


# ── the suite ───────────────────────────────────────────────────────────────────────────────────


def write_suite(dest: Path, seed: int, train: int, test: int, warm: int) -> Tuple[List[str], List[str]]:
    """fixtures/lookup's env with tasks drawn from `seed`: keys like `frost-ram-7`, codes like `Q9N4`; three
    disjoint splits: `warm` (the warm start's gold episodes), `train` (GRPO's pool) and `test` (held out)."""
    src = REPO / "fixtures" / "lookup"
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("env.json", "state_schema.json", "tools.ts", "judge.ts", "policy.md"):
        shutil.copy(src / name, dest / name)
    rng = random.Random(seed)
    keys = [f"{a}-{b}-{d}" for a in ADJECTIVES for b in ANIMALS for d in range(10)]
    rng.shuffle(keys)
    if warm + train + test > len(keys):
        raise SystemExit(f"--warm-tasks + --train-tasks + --test-tasks must be at most {len(keys)} (got {warm + train + test})")
    codes = {k: "".join(rng.choice(LETTERS) + rng.choice(DIGITS) for _ in range(2)) for k in keys[: warm + train + test]}
    (dest / "initial_states.json").write_text(json.dumps([{"codes": codes, "asked": "", "answer": None}]))
    (dest / "tasks").mkdir(exist_ok=True)
    # The warm split's keys come last, so --warm-tasks changes neither GRPO's pool nor the held-out tasks.
    splits = {"train": keys[:train], "test": keys[train: train + test], "warm": keys[train + test: train + test + warm]}
    for split, split_keys in splits.items():
        with open(dest / "tasks" / f"{split}.jsonl", "w", encoding="utf-8") as f:
            for i, key in enumerate(split_keys):
                task = {
                    "id": f"lookup-{split}-{i}",
                    # Double quotes: after a ' the tokenizer reads 'm, 'd, 's, 't as contractions (misty would not be one token).
                    "instruction": f'What is the code behind the key "{key}"? Look it up, then answer with the code.',
                    "initial_patch": [{"op": "replace", "path": "/asked", "value": key}],
                    "actions": [{"name": "lookup_code", "params": {"key": key}}, {"name": "answer", "params": {"code": codes[key]}}],
                }
                f.write(json.dumps(task) + "\n")
    return [f"lookup-train-{i}" for i in range(train)], [f"lookup-test-{i}" for i in range(test)]


# ── the services it starts when given no URLs ────────────────────────────────────────────────────


class Services:
    """The model server and `agent serve`, started from this checkout and stopped at the end."""

    def __init__(self) -> None:
        self.procs: List[subprocess.Popen[str]] = []

    def start(self, argv: List[str], ready: str) -> str:
        proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith(ready):
            self.stop()
            raise RuntimeError(f"{' '.join(argv[:3])} did not start: {proc.stderr.read() if proc.stderr else ''}")
        return line

    def model_server(self, args: argparse.Namespace) -> str:
        line = self.start([sys.executable, str(HERE / "tiny_vllm_server.py"), "--port", "0", "--model", MODEL, "--seed", str(args.seed), *size_flags(args), "--max-batch", "64"], "READY ")
        return line.split()[1]

    def agent_serve(self, suite: Path, out: Path, model_url: str) -> str:
        # The inference server its rollouts may call is fixed here, when it starts.
        line = self.start(["node", str(REPO / "bin" / "agent.js"), "serve", str(suite), "--split", "train,test", "--port", "0", "--json", "--out", str(out), "--max-steps", "8", "--llm-base-url", f"{model_url}/v1"], "{")
        return str(json.loads(line)["url"])

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
        self.procs.clear()


def size_flags(args: argparse.Namespace) -> List[str]:
    return ["--hidden-size", str(args.hidden_size), "--layers", str(args.layers), "--heads", str(args.heads)]


def agent_cli(*argv: str) -> str:
    done = subprocess.run(["node", str(REPO / "bin" / "agent.js"), *argv], cwd=REPO, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"agent {argv[0]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout


def post(url: str, body: Dict[str, Any]) -> Dict[str, Any]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as res:
        answer: Dict[str, Any] = json.load(res)
        return answer


# ── the trainer ──────────────────────────────────────────────────────────────────────────────────


class Trainer:
    def __init__(self, args: argparse.Namespace) -> None:
        tokenizer = tiny.build_tokenizer()
        self.pad = int(tokenizer.pad_token_id)
        self.model = tiny.build_model(len(tokenizer), 4096, args.seed, args.hidden_size, args.layers, args.heads)
        self.model.train()
        self.sft_opt = torch.optim.AdamW(self.model.parameters(), lr=args.sft_lr, weight_decay=0.0)
        self.rl_opt = torch.optim.AdamW(self.model.parameters(), lr=args.lr, weight_decay=0.0)
        self.clip = args.clip
        self.epochs = args.epochs
        self.micro = args.micro_batch

    def logprobs(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """log p(ids[t] | ids[:t]) for t ≥ 1 where mask[t] is set, 0 elsewhere (shape [B, T-1]).

        The prefix every row shares up to the first position the loss reads (the system prompt and
        the tool list, ~500 of an episode's ~550 ids) goes through the model once, its cache
        repeated for every row (the gradient of all rows flows back into it), and the tied head
        runs only where the loss reads: together most of each forward and backward pass."""
        attention = (ids != self.pad).long()
        at = mask[:, 1:] > 0
        # Position t-1 predicts ids[t]: the earliest read is the hidden state before the first masked id.
        first = int(at.float().argmax(-1).min()) if bool(at.any()) else ids.shape[1] - 1
        shared = min(len(os.path.commonprefix(ids.tolist())), first)
        start, past = 0, None
        if shared >= 16:
            start, past = shared, self.model.model(ids[:1, :shared], use_cache=True).past_key_values
            past.batch_repeat_interleave(ids.shape[0])
        positions = torch.arange(start, ids.shape[1])[None].expand(ids.shape[0], -1)
        hidden = self.model.model(ids[:, start:], attention_mask=attention, position_ids=positions, past_key_values=past, use_cache=past is not None).last_hidden_state[:, :-1]
        # No position before `start` is read, so the rows' reads keep their order in the slice.
        read = at[:, start:]
        logits = self.model.lm_head(hidden[read]).float()
        picked = torch.log_softmax(logits, -1).gather(-1, ids[:, 1:][:, start:][read][:, None])[:, 0]
        return torch.zeros(at.shape, dtype=picked.dtype).index_put((at,), picked)

    def pad_batch(self, rows: List[Tuple[List[int], List[int], List[Optional[float]]]]) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        width = max(len(r[0]) for r in rows)
        ids = torch.full((len(rows), width), self.pad)
        mask = torch.zeros((len(rows), width))
        old = torch.zeros((len(rows), width))
        for i, (seq, m, lp) in enumerate(rows):
            ids[i, : len(seq)] = torch.tensor(seq)
            mask[i, : len(seq)] = torch.tensor(m, dtype=torch.float)
            old[i, : len(seq)] = torch.tensor([x if x is not None else 0.0 for x in lp])
        return ids, mask, old

    @staticmethod
    def windows(record: Dict[str, Any], width: int) -> List[Tuple[List[int], List[int], List[Optional[float]]]]:
        """Each generated turn with the `width` ids before it: the record's own ids, mask 1 on the turn."""
        out = []
        for t in record["turns"]:
            at = max(0, t["start"] - width)
            out.append((record["input_ids"][at: t["end"]], [0] * (t["start"] - at) + [1] * (t["end"] - t["start"]), [None] * (t["end"] - at)))
        return out

    def weights(self) -> Dict[str, torch.Tensor]:
        """A copy of the weights, to come back to or to interpolate from."""
        return {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    def load_between(self, a: Dict[str, torch.Tensor], b: Dict[str, torch.Tensor], t: float) -> None:
        """The weights a + t (b - a): a point on the segment between two copies."""
        self.model.load_state_dict({k: torch.lerp(a[k], b[k], t) if a[k].is_floating_point() else a[k] for k in a})

    def sft_step(self, records: List[Dict[str, Any]], window: Optional[int]) -> float:
        rows = [w for r in records for w in self.windows(r, window)] if window else [(r["input_ids"], r["loss_mask"], r["logprobs"]) for r in records]
        ids, mask, _ = self.pad_batch(rows)
        lp = self.logprobs(ids, mask)
        m = mask[:, 1:]
        loss = -(lp * m).sum() / m.sum().clamp(min=1)
        self.sft_opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.sft_opt.step()
        return float(loss.detach())

    def grpo_step(self, groups: List[RolloutGroup]) -> Dict[str, float]:
        """Group-relative advantages, then `epochs` clipped policy-gradient steps on the batch (the ratio against the sampler's logprobs keeps the later ones honest)."""
        rows, advantages = [], []
        for g in groups:
            rewards = [float(r["reward"]) for r in g.records]
            mean = sum(rewards) / len(rewards)
            std = math.sqrt(sum((x - mean) ** 2 for x in rewards) / len(rewards))
            if std < 1e-6:
                continue  # every episode alike: no signal in this group
            for r, reward in zip(g.records, rewards):
                rows.append((r["input_ids"], r["loss_mask"], r["logprobs"]))
                advantages.append((reward - mean) / (std + 1e-6))
        if not rows:
            return {"loss": 0.0, "clipped": 0.0, "sequences": 0.0}
        tokens = sum(sum(m) for _, m, _ in rows)
        total, clipped = 0.0, 0.0
        for _ in range(self.epochs):
            self.rl_opt.zero_grad()
            total, clipped = 0.0, 0.0
            for at in range(0, len(rows), self.micro):
                ids, mask, old = self.pad_batch(rows[at: at + self.micro])
                adv = torch.tensor(advantages[at: at + self.micro])[:, None]
                lp = self.logprobs(ids, mask)
                m, old = mask[:, 1:], old[:, 1:]
                ratio = torch.exp(lp - old)
                objective = torch.minimum(ratio * adv, ratio.clamp(1 - self.clip, 1 + self.clip) * adv)
                # GRPO's 1/|o_i|: each episode's mean over its own generated tokens, so a long failed episode
                # (a model retrying invalid calls) weighs as much as a short success, not six times more.
                loss = -((objective * m).sum(-1) / m.sum(-1).clamp(min=1)).sum() / len(rows)
                loss.backward()
                total += float(loss.detach())
                clipped += float((((ratio - 1).abs() > self.clip).float() * m).sum())
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.rl_opt.step()
        return {"loss": total, "clipped": clipped / tokens, "sequences": float(len(rows))}

    def push(self, model_url: str, version: int, folder: Path) -> None:
        """Writes the weights as safetensors and has the inference server load them as `version`."""
        from safetensors.torch import save_file

        path = folder / f"weights-{version}.safetensors"
        # Tied embeddings share storage with lm_head: safetensors refuses shared tensors, the server re-ties them.
        state = {k: v.detach().clone().contiguous() for k, v in self.model.state_dict().items() if k != "lm_head.weight"}
        save_file(state, str(path))
        try:
            post(f"{model_url}/update_weights", {"path": str(path), "version": version})
        except urllib.error.HTTPError as err:
            detail = err.read().decode(errors="replace")[:300]
            if err.code in (404, 405):
                raise SystemExit(f"the inference server at {model_url} has no POST /update_weights (HTTP {err.code}): the loop cannot push weights to it. "
                                 "Serve the model with examples/python/tiny_vllm_server.py, or give your server a weight route and change Trainer.push.") from None
            raise SystemExit(f"the inference server at {model_url} refused weights version {version} (HTTP {err.code}): {detail}") from None
        finally:
            path.unlink()


# ── the loop ─────────────────────────────────────────────────────────────────────────────────────


@dataclass
class Clock:
    start: float = field(default_factory=time.monotonic)
    waited: float = 0.0

    def elapsed(self) -> float:
        return time.monotonic() - self.start


def success(records: List[Dict[str, Any]]) -> float:
    return sum(1 for r in records if r["reward"] >= 1) / max(1, len(records))


async def evaluate(env: Env[Any, Any], model_url: str, test_ids: List[str], max_tokens: int) -> float:
    """Held-out tasks, one greedy episode each."""
    stream = await env.rollouts(test_ids, n=1, base_url=f"{model_url}/v1", model=MODEL, sampling={"temperature": 0, "max_tokens": max_tokens}, concurrency=64)
    return success([r for g in await stream.collect() for r in g.records])


async def sampled_success(env: Env[Any, Any], args: argparse.Namespace, model_url: str, task_ids: List[str], seed: int) -> float:
    """How often the policy solves train tasks as GRPO will sample it (temperature 1, --group-size per task)."""
    stream = await env.rollouts(task_ids, n=args.group_size, base_url=f"{model_url}/v1", model=MODEL, sampling={"temperature": args.temperature, "max_tokens": args.max_tokens}, concurrency=64, seed=seed)
    return round(success([r for g in await stream.collect() for r in g.records]), 4)


async def rollouts(env: Env[Any, Any], args: argparse.Namespace, model_url: str, pool: List[str], seed: int) -> Tuple[List[RolloutGroup], Optional[RolloutSummary]]:
    """--tasks-per-step groups drawn from the pool by the server's curriculum; with --filter zero_variance, a group whose
    K rewards are all equal (nothing for GRPO to learn) is replaced by another draw, --max-tries groups at most."""
    stream = await env.rollouts(pool, n=args.group_size, base_url=f"{model_url}/v1", model=MODEL, sampling={"temperature": args.temperature, "max_tokens": args.max_tokens},
                                max_staleness=args.max_staleness, concurrency=64, seed=seed, groups=args.tasks_per_step, filter=args.filter,
                                sampler=args.sampler, oversample=args.oversample, max_tries=args.max_tries or None)
    return await stream.collect(), stream.summary


def batches(items: List[Any], size: int, rng: random.Random) -> Iterator[List[Any]]:
    while True:
        order = items[:]
        rng.shuffle(order)
        for at in range(0, len(order) - size + 1, size):
            yield order[at: at + size]


async def find_band(probe: Callable[[float], Awaitable[float]], low: float, high: float, tries: int) -> float:
    """Bisects [0, 1] for a point whose probe lands in [low, high), given that probe(0) is below `low`
    and probe(1) at least `high`; `probe(t)` sets the weights at t as it measures. Ends at the first
    point in the band, or, when the band lies inside a step narrower than 2^-tries, at the last point
    below it. Returns the share there."""
    lo, hi = 0.0, 1.0
    for _ in range(tries):
        share = await probe((lo + hi) / 2)
        if low <= share < high:
            return share
        lo, hi = (lo, (lo + hi) / 2) if share >= high else ((lo + hi) / 2, hi)
    return await probe(lo)


async def train(args: argparse.Namespace, model_url: str, serve_url: str, suite: Path, train_ids: List[str], test_ids: List[str], work: Path) -> List[Dict[str, Any]]:
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    rng = random.Random(args.seed)
    trainer = Trainer(args)
    clock = Clock()
    metrics: List[Dict[str, Any]] = []
    out = open(args.metrics, "w", encoding="utf-8") if args.metrics else None

    def log(line: Dict[str, Any]) -> None:
        line = {**line, "elapsed_s": round(clock.elapsed(), 1)}
        metrics.append(line)
        if out:
            out.write(json.dumps(line) + "\n")
            out.flush()
        if not args.quiet:
            print(json.dumps(line), flush=True)

    async with Env(serve_url, timeout_s=600) as env:
        version = 0
        await env.weight_version(version)
        log({"step": 0, "phase": "start", "weight_version": version, "train_success": None, "eval_success": await evaluate(env, model_url, test_ids, args.max_tokens), "mean_reward": None, "staleness": None})

        if args.sft_window_steps + args.sft_steps > 0:
            # Gold episodes, token-exact through the server's template: what the model should have generated, mask 1.
            # On the warm split: had they been GRPO's tasks, a success there could be a code remembered from
            # here rather than read from the lookup, and GRPO would reward remembering (which no held-out task rewards).
            # In a thread: the socket to the server must keep answering its pings meanwhile (a long
            # benchmark on a blocked loop gets the connection cut as a client that stopped answering).
            run = json.loads(await asyncio.to_thread(agent_cli, "benchmark", str(suite), "--split", "warm", "--policy", "gold", "--tokens", "--llm-base-url", f"{model_url}/v1", "--concurrency", "32", "--out", str(work / "gold"), "--json"))["run_dir"]
            await asyncio.to_thread(agent_cli, "export", run, "--format", "tokens", "--out", str(work / "gold.jsonl"))
            gold = [json.loads(line) for line in (work / "gold.jsonl").read_text().splitlines()]
            source = batches(gold, args.sft_batch, rng)

            async def publish(step: int, loss: float, probe: Optional[float] = None) -> None:
                nonlocal version
                version += 1
                await asyncio.to_thread(trainer.push, model_url, version, work)
                await env.weight_version(version)
                evaluated = await evaluate(env, model_url, test_ids, args.max_tokens)
                log({"step": step, "phase": "sft", "weight_version": version, "train_success": probe, "eval_success": evaluated, "mean_reward": None, "staleness": None, "loss": round(loss, 4)})

            loss = 0.0
            for step in range(1, args.sft_window_steps + 1):
                loss = await asyncio.to_thread(trainer.sft_step, next(source), args.sft_window)
                if args.eval_every_sft and step % args.eval_every_sft == 0 and step < args.sft_window_steps:
                    await publish(step, loss)
            # Whole sequences until the greedy policy solves a share of --probe-tasks train tasks within
            # [--warm-until, --warm-below): GRPO needs groups whose rewards differ, and no more than that
            # is taught by imitation; the rest is left to RL. Greedy success is a cliff (a tiny model
            # learns to copy in a step or two: 0.03 to 0.5 from one probe to the next), so a probe past
            # the band bisects the segment between the weights of the last probe below it and these.
            probed = False
            probe_ids = rng.sample(train_ids, args.probe_tasks) if args.warm_until > 0 else []

            async def probe() -> float:
                nonlocal version
                version += 1
                await asyncio.to_thread(trainer.push, model_url, version, work)
                await env.weight_version(version)
                return await evaluate(env, model_url, probe_ids, args.max_tokens)

            below = trainer.weights()
            step = 0
            while step < args.sft_steps:
                step += 1
                loss = await asyncio.to_thread(trainer.sft_step, next(source), None)
                if args.warm_until <= 0 or (step % args.probe_every and step < args.sft_steps):
                    continue
                # No greedy episode succeeds while the loss is high: probing then only costs time.
                if loss >= args.probe_below_loss and step < args.sft_steps:
                    below = trainer.weights()
                    continue
                share = await probe()
                if not args.quiet:
                    print(json.dumps({"warm_step": step, "probe_greedy": share, "loss": round(loss, 4), "elapsed_s": round(clock.elapsed(), 1)}), flush=True)
                bisected = share >= args.warm_below
                if bisected:
                    above = trainer.weights()

                    async def probe_between(t: float) -> float:
                        trainer.load_between(below, above, t)
                        share = await probe()
                        if not args.quiet:
                            print(json.dumps({"warm_step": step, "between": t, "probe_greedy": share, "elapsed_s": round(clock.elapsed(), 1)}), flush=True)
                        return share

                    share = await find_band(probe_between, args.warm_until, args.warm_below, args.bisect)
                if bisected or share >= args.warm_until or step == args.sft_steps:
                    sampled = await sampled_success(env, args, model_url, rng.sample(train_ids, 8), rng.randrange(2**31))
                    evaluated = await evaluate(env, model_url, test_ids, args.max_tokens)
                    log({"step": args.sft_window_steps + step, "phase": "sft", "weight_version": version, "train_success": sampled, "eval_success": evaluated, "mean_reward": None, "staleness": None, "loss": round(loss, 4), "probe_greedy": share})
                    probed = True
                    break
                below = trainer.weights()
            if not probed:
                await publish(args.sft_window_steps + args.sft_steps, loss)

        # The first batch, then each next one while the update of the last runs: off-policy by at most a version.
        pending = asyncio.create_task(rollouts(env, args, model_url, train_ids, rng.randrange(2**31))) if args.steps > 0 else None
        for step in range(1, args.steps + 1):
            assert pending is not None
            # The last step once the time budget is spent: its batch is the one in flight.
            last_step = step == args.steps or (args.max_minutes > 0 and clock.elapsed() >= args.max_minutes * 60)
            waited = time.monotonic()
            groups, summary = await pending
            clock.waited += time.monotonic() - waited
            if not last_step:
                pending = asyncio.create_task(rollouts(env, args, model_url, train_ids, rng.randrange(2**31)))
            records = [r for g in groups for r in g.records]
            # How many versions the weights being updated are ahead of the oldest the batch was sampled with.
            staleness = max((version - g.weight_version for g in groups if g.weight_version is not None), default=None)
            stats = await asyncio.to_thread(trainer.grpo_step, groups)
            if groups:
                version += 1
                await asyncio.to_thread(trainer.push, model_url, version, work)
                await env.weight_version(version)
            evaluated = await evaluate(env, model_url, test_ids, args.max_tokens) if step % args.eval_every == 0 or last_step else None
            log({
                "step": step,
                "phase": "grpo",
                "weight_version": version,
                "train_success": round(success(records), 4) if records else None,
                "eval_success": evaluated,
                "mean_reward": round(sum(r["reward"] for r in records) / max(1, len(records)), 4),
                "staleness": staleness,
                "groups": len(groups),
                # Groups the server ran for this batch, and those it left out (all K rewards equal).
                "tried": summary.tried if summary else None,
                "filtered": (summary.filtered.get("zero_variance", 0) if summary else None),
                "clipped": round(stats["clipped"], 4),
            })
            if last_step:
                break
    if out:
        out.close()
    summary = {"wall_s": round(clock.elapsed(), 1), "waited_on_rollouts_s": round(clock.waited, 1), "waited_share": round(clock.waited / max(1e-9, clock.elapsed()), 3)}
    if not args.quiet:
        print(json.dumps({"summary": summary}), flush=True)
    metrics.append({"summary": summary})
    return metrics


def plot(metrics: List[Dict[str, Any]], file: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    evals = [(m["elapsed_s"] / 60, m["eval_success"]) for m in metrics if m.get("eval_success") is not None]
    trains = [(m["elapsed_s"] / 60, m["train_success"]) for m in metrics if m.get("train_success") is not None]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    ax.plot(*zip(*evals), marker="o", label="held-out success (greedy)")
    if trains:
        ax.plot(*zip(*trains), alpha=0.6, label="train success (sampled, K per task)")
    grpo = next((m["elapsed_s"] / 60 for m in metrics if m.get("phase") == "grpo"), None)
    if grpo is not None:
        ax.axvline(grpo, color="grey", linestyle=":", label="SFT warm start → GRPO")
    ax.set_xlabel("wall time (minutes, two CPU cores)")
    ax.set_ylabel("success")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(loc="lower right")
    ax.set_title("grpo_tools.py: a tiny Qwen2 learns to look up a code, then answer")
    fig.tight_layout()
    fig.savefig(file, dpi=120)


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model-url", help="a running vLLM-compatible server with POST /update_weights (default: start tiny_vllm_server.py)")
    p.add_argument("--serve-url", help="a running agent serve of the suite --write-suite makes (default: start one)")
    p.add_argument("--write-suite", help="write the suite for --seed into this folder and exit")
    p.add_argument("--seed", type=int, default=0, help="the model's initialization, the tasks' keys and codes, and the sampling")
    p.add_argument("--train-tasks", type=int, default=800)
    p.add_argument("--test-tasks", type=int, default=50)
    p.add_argument("--warm-tasks", type=int, default=800, help="tasks of the warm start's gold episodes, a split of their own: GRPO's pool holds no code the warm start showed")
    p.add_argument("--sft-window-steps", type=int, default=1000, help="supervised steps on gold turns with the --sft-window ids before each (0: none)")
    p.add_argument("--sft-window", type=int, default=40)
    p.add_argument("--sft-steps", type=int, default=80, help="then supervised steps on whole gold sequences (with --warm-until: at most) (0: none)")
    p.add_argument("--warm-until", type=float, default=0.1, help="end the warm start once the greedy success on --probe-tasks train tasks reaches this, to leave the rest to GRPO (0: run all --sft-steps)")
    p.add_argument("--warm-below", type=float, default=0.2, help="with --warm-until: a probe that reaches this bisects the weights between the last probe below the band and these, --bisect times at most")
    p.add_argument("--bisect", type=int, default=6, help="probes of the bisection that looks for the band when a probe overshoots it")
    p.add_argument("--probe-every", type=int, default=2, help="whole-sequence steps between two probes")
    p.add_argument("--probe-tasks", type=int, default=64)
    p.add_argument("--probe-below-loss", type=float, default=0.3, help="probe only once a whole-sequence step's loss is below this")
    p.add_argument("--sft-batch", type=int, default=16)
    p.add_argument("--sft-lr", type=float, default=1e-3, help="the warm start's rate (at 3e-3 some initializations never learn to copy the first id of a key or a code from the whole sequence)")
    p.add_argument("--eval-every-sft", type=int, default=0, help="held-out evaluations during the windowed phase, every this many steps (0: none; the policy cannot solve an episode before the whole-sequence phase)")
    p.add_argument("--steps", type=int, default=200, help="GRPO steps at most")
    p.add_argument("--max-minutes", type=float, default=15.0, help="no GRPO step starts after this much wall time, warm start included (0: no limit)")
    p.add_argument("--tasks-per-step", type=int, default=8, help="groups per GRPO step, their tasks drawn from the train split by --sampler")
    p.add_argument("--sampler", choices=["uniform", "difficulty"], default="uniform", help="uniform: each train task once before any twice; difficulty: the tasks whose recent success is neither 0 nor 1 first (the server's curriculum)")
    p.add_argument("--filter", choices=["zero_variance", "none"], default="zero_variance", help="zero_variance: a group whose K rewards are all equal is replaced by another draw, --max-tries groups a step at most")
    p.add_argument("--oversample", type=float, default=1.0, help="groups in flight per group asked for; the surplus is cancelled once enough are in")
    p.add_argument("--max-tries", type=int, default=0, help="groups the server may run per step, replacements included (0: 4 x --tasks-per-step)")
    p.add_argument("--group-size", type=int, default=8, help="K: episodes per task (the GRPO group)")
    p.add_argument("--temperature", type=float, default=0.7, help="the sampling temperature of GRPO's rollouts (the logprobs stay the model's raw ones, as vLLM's)")
    p.add_argument("--lr", type=float, default=4e-4)
    p.add_argument("--clip", type=float, default=0.2)
    p.add_argument("--epochs", type=int, default=4, help="gradient steps per batch of rollouts")
    p.add_argument("--micro-batch", type=int, default=16)
    p.add_argument("--max-staleness", type=int, default=1)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--eval-every", type=int, default=5)
    p.add_argument("--hidden-size", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--metrics", help="one JSON line per training step")
    p.add_argument("--plot", help="a PNG of the curve (matplotlib)")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    # A band that holds nothing would bisect to its lower edge every time; a probe every 0 steps never runs.
    if args.warm_until > 0 and not args.warm_until < args.warm_below:
        p.error(f"--warm-below ({args.warm_below}) must be above --warm-until ({args.warm_until}): the warm start stops when the probe lands between them")
    for name in ("probe_every", "probe_tasks", "sft_batch", "tasks_per_step", "group_size", "eval_every"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1 (got {getattr(args, name)})")
    if args.sft_window_steps + args.sft_steps > 0 and args.warm_tasks < args.sft_batch:
        p.error(f"--warm-tasks ({args.warm_tasks}) must be at least --sft-batch ({args.sft_batch}): the warm start's batches are drawn from them")
    if args.bisect < 0:
        p.error(f"--bisect must be 0 or more (got {args.bisect})")
    return args


def main(argv: Optional[List[str]] = None) -> List[Dict[str, Any]]:
    args = parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="grpo-tools-"))
    try:
        suite = Path(args.write_suite) if args.write_suite else work / "suite"
        train_ids, test_ids = write_suite(suite, args.seed, args.train_tasks, args.test_tasks, args.warm_tasks)
        if args.write_suite:
            return []
        services = Services()
        try:
            model_url = args.model_url or services.model_server(args)
            serve_url = args.serve_url or services.agent_serve(suite, work / "runs", model_url)
            metrics = asyncio.run(train(args, model_url, serve_url, suite, train_ids, test_ids, work))
        finally:
            services.stop()
        if args.plot:
            plot(metrics, args.plot)
        return metrics
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # A plain kill stops the servers this started too (main's finally), as Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    main()
