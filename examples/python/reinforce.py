"""REINFORCE through `agent serve`, on an env whose reward comes late from a judge.

The env (fixtures/signal-game): look at a signal, answer with a choice; a slow judge decides ~300 ms
later whether the choice is the one the signal stands for, and its verdict lands on the answer step.
A small torch policy (signal -> choice) plays many episodes at once over WebSocket sessions, waits for
each verdict as it is pushed (matched to its step by trace id), and learns from it. Random play wins
1 in 4; the policy should pass 0.9 within a few minutes on two CPU cores.

    npx agent serve fixtures/signal-game --port 8000 &
    python examples/python/reinforce.py --url http://127.0.0.1:8000 --plot docs/img/reinforce-signal-game.png
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
from dataclasses import dataclass
from typing import List, Optional

import torch

from agentic_rl import Env

SIGNALS = ["red", "green", "blue", "yellow"]
CHOICES = 4


@dataclass
class Episode:
    signal: int
    choice: int
    reward: float
    trace_id: str


class Policy(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.logits = torch.nn.Linear(len(SIGNALS), CHOICES)
        torch.nn.init.zeros_(self.logits.weight)
        torch.nn.init.zeros_(self.logits.bias)

    def forward(self, signals: torch.Tensor) -> torch.distributions.Categorical:
        return torch.distributions.Categorical(logits=self.logits(torch.nn.functional.one_hot(signals, len(SIGNALS)).float()))


async def play(env: Env, policy: Policy, rng: random.Random, reward_timeout_s: float) -> Episode:
    await env.reset(seed=rng.randrange(1 << 30))
    signal = SIGNALS.index((await env.step("look")).observation["signal"])
    with torch.no_grad():
        choice = int(policy(torch.tensor([signal])).sample().item())
    answer = await env.step("answer", {"choice": choice})
    assert answer.done and answer.rewards["judge"].status == "pending", "the judge is slow: its verdict comes after the step"
    # The verdict arrives later, pushed on this socket: it must land on the answer's step.
    while True:
        reward = await env.next_reward(timeout_s=reward_timeout_s)
        if reward.source == "judge" and reward.trace_id == answer.trace_id:
            break
    return Episode(signal, choice, float(reward.value or 0.0), answer.trace_id or "")


async def train(url: str, sessions: int, max_batches: int, target: float, lr: float, seed: int, token: Optional[str]) -> List[float]:
    torch.manual_seed(seed)
    rng = random.Random(seed)
    policy = Policy()
    optimizer = torch.optim.Adam(policy.parameters(), lr=lr)
    envs = [Env(url, token) for _ in range(sessions)]
    for env in envs:
        await env.connect()
        await env.subscribe()
    curve: List[float] = []
    started = time.monotonic()
    try:
        for batch in range(1, max_batches + 1):
            episodes = await asyncio.gather(*(play(env, policy, rng, 60) for env in envs))
            rewards = torch.tensor([e.reward for e in episodes])
            dist = policy(torch.tensor([e.signal for e in episodes]))
            advantage = rewards - rewards.mean()
            loss = -(dist.log_prob(torch.tensor([e.choice for e in episodes])) * advantage).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            curve.append(float(rewards.mean()))
            print(json.dumps({"batch": batch, "episodes": batch * sessions, "success": round(curve[-1], 3), "elapsed_s": round(time.monotonic() - started, 1)}), flush=True)
            if len(curve) >= 3 and sum(curve[-3:]) / 3 >= target:
                break
    finally:
        for env in envs:
            await env.close()
    return curve


def plot(curve: List[float], sessions: int, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=120)
    ax.plot([(i + 1) * sessions for i in range(len(curve))], curve, marker="o", markersize=3, label="success rate per batch")
    ax.axhline(0.25, color="grey", linestyle="--", linewidth=1, label="random play (1 in 4)")
    ax.axhline(0.9, color="green", linestyle=":", linewidth=1, label="target 0.9")
    ax.set_xlabel("episodes (judge verdicts arrive ~300 ms after each answer)")
    ax.set_ylabel("success")
    ax.set_ylim(0, 1.02)
    ax.set_title("REINFORCE through agent serve: fixtures/signal-game")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--token", default=None)
    parser.add_argument("--sessions", type=int, default=32, help="episodes played at once (one WebSocket session each)")
    parser.add_argument("--batches", type=int, default=60, help="updates at most")
    parser.add_argument("--target", type=float, default=0.9, help="stop once the mean success of the last 3 batches reaches this")
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot", default=None, help="write the learning curve here (PNG)")
    args = parser.parse_args()
    curve = asyncio.run(train(args.url, args.sessions, args.batches, args.target, args.lr, args.seed, args.token))
    if args.plot:
        plot(curve, args.sessions, args.plot)
    print(json.dumps({"batches": len(curve), "first": curve[0], "last3": sum(curve[-3:]) / min(3, len(curve))}))


if __name__ == "__main__":
    main()
