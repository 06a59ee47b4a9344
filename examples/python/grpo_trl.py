"""TRL's GRPOTrainer learning through `agent serve`, with TRL's `rollout_func` (its OpenEnv path).

Every rollout is an episode of the served env (fixtures/signal-game): reset from the prompt's seed,
`look` at the signal, let the model write its answer (one token), `answer` with it, and wait for the
judge's verdict, which arrives ~300 ms later on the answer step (pushed, matched by trace id). The
verdict is the reward GRPO optimises. The causal LM is tiny and built from a config, with a
tokenizer built here: no weights are downloaded.

    npx agent serve fixtures/signal-game --port 8000 &
    python examples/python/grpo_trl.py --url http://127.0.0.1:8000 --steps 20
"""
from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from typing import Any, Dict, List, Optional

import torch

from agentic_rl import Env

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

VOCAB = ["<pad>", "<eos>", "<unk>", "seed", "signal", "answer", "red", "green", "blue", "yellow", "0", "1", "2", "3"]
CHOICES = ["0", "1", "2", "3"]


def build_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.WordLevel({t: i for i, t in enumerate(VOCAB)}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")


def build_model(tokenizer):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(VOCAB), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
        max_position_embeddings=32, pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.eos_token_id,
    )
    return LlamaForCausalLM(config)


async def episodes(url: str, seeds: List[int], answer_for, token: Optional[str]) -> List[Dict[str, Any]]:
    """One episode per seed, all at once: the model answers each signal; the judge's late verdict is the reward."""

    async def one(seed: int) -> Dict[str, Any]:
        async with Env(url, token) as env:
            await env.subscribe()
            await env.reset(seed=seed)
            signal = (await env.step("look")).observation["signal"]
            prompt = f"seed {seed} signal {signal} answer"
            completion_id, logprob, text = answer_for(prompt)
            choice = int(text) if text in CHOICES else -1
            if choice < 0:  # not an answer the env takes: no verdict, no reward
                return {"prompt": prompt, "completion_id": completion_id, "logprob": logprob, "reward": 0.0}
            answer = await env.step("answer", {"choice": choice})
            while True:
                reward = await env.next_reward(timeout_s=60)
                if reward.source == "judge" and reward.trace_id == answer.trace_id:
                    return {"prompt": prompt, "completion_id": completion_id, "logprob": logprob, "reward": float(reward.value or 0.0)}

    return await asyncio.gather(*(one(s) for s in seeds))


def make_rollout(url: str, token: Optional[str]):
    def rollout(prompts: List[str], trainer) -> Dict[str, Any]:
        tokenizer, model = trainer.processing_class, trainer.model

        def answer_for(prompt: str):
            ids = tokenizer(prompt, return_tensors="pt").input_ids
            with torch.no_grad():
                logits = model(ids).logits[0, -1]
            dist = torch.distributions.Categorical(logits=logits)
            token_id = int(dist.sample())
            return token_id, float(dist.log_prob(torch.tensor(token_id))), tokenizer.convert_ids_to_tokens(token_id)

        # Each prompt names a seed (TRL's sampler repeats a prompt num_generations times: one group per seed).
        seeds = [int(p.split()[1]) for p in prompts]
        results = asyncio.run(episodes(url, seeds, answer_for, token))
        return {
            "prompt_ids": [tokenizer(r["prompt"]).input_ids for r in results],
            "completion_ids": [[r["completion_id"]] for r in results],
            "logprobs": [[r["logprob"]] for r in results],
            "env_reward": [r["reward"] for r in results],
        }

    return rollout


def judge_reward(completions, env_reward, **_: Any) -> List[float]:
    """The env's reward, as the rollout brought it back."""
    return list(env_reward)


def train(url: str, steps: int, token: Optional[str] = None, output_dir: Optional[str] = None) -> List[Dict[str, Any]]:
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    tokenizer = build_tokenizer()
    model = build_model(tokenizer)
    dataset = Dataset.from_dict({"prompt": [f"seed {s}" for s in range(4)] * 64})
    config = GRPOConfig(
        output_dir=output_dir or tempfile.mkdtemp(prefix="grpo-agent-serve-"),
        max_steps=steps,
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=2,
        learning_rate=5e-2,
        beta=0.0,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
        seed=0,
    )
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=[judge_reward], args=config, train_dataset=dataset, rollout_func=make_rollout(url, token))
    trainer.train()
    return [h for h in trainer.state.log_history if "reward" in h]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--token", default=None)
    parser.add_argument("--steps", type=int, default=20, help="optimisation steps")
    args = parser.parse_args()
    for entry in train(args.url, args.steps, args.token):
        print({k: entry[k] for k in ("step", "reward", "loss") if k in entry})


if __name__ == "__main__":
    main()
