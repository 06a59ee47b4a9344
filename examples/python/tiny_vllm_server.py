"""A small vLLM-compatible inference server, for tests and examples on a CPU with no download.

It serves a tiny causal LM built from a config (Qwen2 architecture, random weights from --seed)
with a real Hugging Face tokenizer made on the spot (byte-level BPE trained on a built-in corpus,
ChatML special tokens, a Qwen2.5-style chat template with Hermes tool calls), on the routes of
vLLM's OpenAI-compatible server that token-in, token-out rollouts use, with vLLM's field names:

  GET  /v1/models        {"data": [{"id", "max_model_len", ...}]}
  POST /tokenize         {model, messages, tools?, add_generation_prompt} or {model, prompt}
                         -> {count, max_model_len, tokens}
  POST /detokenize       {model, tokens} -> {prompt}
  POST /v1/completions   {model, prompt: [ids] | str, max_tokens (default 16), temperature,
                         top_p, seed, logprobs, return_token_ids} -> choices[0] with text,
                         logprobs.token_logprobs, finish_reason, stop_reason, token_ids,
                         prompt_token_ids; and `weight_version` beside them
  POST /update_weights   {path, version} -> {weight_version}: loads a safetensors file the trainer
                         wrote (the model's full state dict, names as `model.state_dict()` has
                         them) between two generations; `version` must be above the current one
                         (409 otherwise, nothing loaded)

The weight update is ours, named after the route prime-rl's vLLM server adds for the same job
(`POST /update_weights` with a checkpoint path, loaded by a worker extension); SGLang's is
`/update_weights_from_disk` {model_path}; TRL's `trl vllm-serve` broadcasts tensors over NCCL
(`/init_communicator/`, `/update_named_param/`) instead of a file. vLLM itself serves no weight
route: trainers add one (a worker extension calling `load_weights`) or restart the server.

Requests that arrive together are generated as one batch, as vLLM batches them, and the prefix
their prompts share (an agent's system prompt and tool list) is computed once for the batch, as
vLLM's automatic prefix caching does: the same ids and logprobs, about 3x faster for an episode
whose ~500-id tool list every prompt repeats.

Log-probabilities are the model's raw ones (log-softmax of its logits, before temperature and
top-p: vLLM's default `logprobs_mode`, raw_logprobs). Generation ends on `<|im_end|>` or
`<|endoftext|>`, which is kept in token_ids (vLLM keeps the stop token it ended on) and left out of
the text (skip_special_tokens).

--script FILE makes the model say given text where a rule matches the prompt (a JSON list of
{"match": <regex on the detokenized prompt>, "text": <template, \\1 for groups>}): the forced ids
are scored by the model like sampled ones, so tests can drive multi-turn tool use through a
random model. --log FILE appends every completion as the server produced it (one JSON line), for
checks that a client recorded exactly that.

Usage: python tiny_vllm_server.py --port 0   (prints "READY <url>" once it listens)
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import queue
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

# A shared prefix shorter than this is not worth a pass of its own.
MIN_SHARED_PREFIX = 16
END_OF_TURN = "<|im_end|>"
END_OF_TEXT = "<|endoftext|>"
SPECIAL = [END_OF_TEXT, "<|im_start|>", END_OF_TURN]
# Added, not special: they stay in the text with skip_special_tokens, as in Qwen's tokenizer.
MARKUP = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]

# Qwen2.5's chat template, abridged: tools in the system turn, Hermes tool calls, tool results
# grouped into one user turn.
CHAT_TEMPLATE = (
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] }}"
    "{%- else %}{{- 'You are a helpful assistant.' }}{%- endif %}"
    "{{- '\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\\n</tool_call><|im_end|>\\n' }}"
    "{%- else %}"
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{%- endif %}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if (message.role == 'user') or (message.role == 'system' and not loop.first) "
    "or (message.role == 'assistant' and not message.tool_calls) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- elif message.role == 'assistant' %}"
    "{{- '<|im_start|>' + message.role }}"
    "{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}"
    "{%- for tool_call in message.tool_calls %}"
    "{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}"
    "{{- '\\n<tool_call>\\n{\"name\": \"' }}{{- tool_call.name }}{{- '\", \"arguments\": ' }}"
    "{{- tool_call.arguments | tojson }}{{- '}\\n</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != 'tool') %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' }}{{- message.content }}{{- '\\n</tool_response>' }}"
    "{%- if loop.last or (messages[loop.index0 + 1].role != 'tool') %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

CORPUS = [
    "You are a helpful assistant. You may call one or more functions to assist with the user query.",
    'For each function call, return a json object with function name and arguments: {"name": "lookup_code", "arguments": {"key": "amber-fox"}}',
    '{"type": "function", "function": {"name": "answer", "description": "Answer the user.", "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}}}',
    "What is the code behind the key? Look it up, then answer with the code. The code is K7Q2.",
    "The quick brown fox jumps over the lazy dog. 0123456789 ABCDEFGHIJKLMNOPQRSTUVWXYZ abcdefghijklmnopqrstuvwxyz",
    "amber brisk coral dusky ember frost gilded hazel ivory jade keen lunar misty noble olive pale quiet rusty silver tidal",
    "fox owl elk ram yak cod bee jay ant eel. Hello! How can I help you today? I need help with my order.",
    '{"key": "frost-ram", "code": "QN9Y"} {"answered": "QN9Y"} Error: no such key',
    # Key words as they appear inside a key ('frost-ram-7'): whole tokens there too, not letters.
    "-".join(["amber", "brisk", "coral", "dusky", "ember", "frost", "gilded", "hazel", "ivory", "jade", "keen", "lunar", "misty", "noble", "olive", "pale", "quiet", "rusty", "silver", "tidal", "fox", "owl", "elk", "ram", "yak", "cod", "bee", "jay", "ant", "eel"]) * 3,
]


def build_tokenizer(vocab_size: int = 1024) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained on the built-in corpus: any text encodes; deterministic."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=END_OF_TURN,
        pad_token=END_OF_TEXT,
        additional_special_tokens=["<|im_start|>"],
    )
    fast.add_tokens(MARKUP)
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_model(vocab: int, max_model_len: int, seed: int, hidden: int = 64, layers: int = 2, heads: int = 4) -> Qwen2ForCausalLM:
    """A Qwen2 model with random weights from `seed`: the same arguments build the same weights (a trainer and this server agree on version 0).

    Each attention head's output projection starts as the transpose of its value projection, so
    that W_O·W_V is positive semi-definite: a head copies what it attends to. That is the in-context
    copying a pretrained model brings; from plain random weights a 2-layer model plateaus for
    thousands of steps before it finds it (reading a key or a code back out of its context is
    most of what a tool-using turn does).
    """
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=max_model_len,
        tie_word_embeddings=True,
    )
    model = Qwen2ForCausalLM(config)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.copy_(layer.self_attn.v_proj.weight.T)
    model.eval()
    return model


class VersionConflict(Exception):
    """A weight update older than (or as old as) the weights being served."""


class Engine:
    """The model, its tokenizer, and one generation at a time (a CPU has nothing to batch with)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.name: str = args.model
        self.max_model_len: int = args.max_model_len
        self.tokenizer = build_tokenizer()
        self.model = build_model(len(self.tokenizer), args.max_model_len, args.seed, args.hidden_size, args.layers, args.heads)
        self.stop_ids = {self.tokenizer.convert_tokens_to_ids(END_OF_TURN), self.tokenizer.convert_tokens_to_ids(END_OF_TEXT)}
        self.end_of_turn = self.tokenizer.convert_tokens_to_ids(END_OF_TURN)
        self.rules: list[tuple[re.Pattern[str], str]] = []
        if args.script:
            with open(args.script, encoding="utf-8") as f:
                self.rules = [(re.compile(r["match"], re.DOTALL), r["text"]) for r in json.load(f)]
        self.log_path: str | None = args.log
        # Held while a batch generates: a weight update lands between two batches.
        self.lock = threading.Lock()
        self.log_lock = threading.Lock()
        self.version = 0
        self.max_batch: int = args.max_batch
        # Logits of the last position only (`num_logits_to_keep` before transformers 4.50).
        params = inspect.signature(self.model.forward).parameters
        self.last_logits_only: dict[str, int] = next(({name: 1} for name in ("logits_to_keep", "num_logits_to_keep") if name in params), {})
        self.jobs: queue.Queue[Job] = queue.Queue()
        threading.Thread(target=self.serve_jobs, daemon=True).start()

    def update_weights(self, path: str, version: int) -> None:
        """Loads a state dict the trainer wrote, between two generations (it waits for the one running)."""
        from safetensors.torch import load_file

        state = load_file(path)
        # Checked whole before anything is copied: a file that does not fit leaves the served weights as they were.
        own = {k: v for k, v in self.model.state_dict().items() if k != "lm_head.weight"}
        missing = sorted(set(own) - set(state))
        unexpected = sorted(set(state) - set(own) - {"lm_head.weight"})
        misshapen = sorted(k for k in set(own) & set(state) if own[k].shape != state[k].shape)
        if missing or unexpected or misshapen:
            raise ValueError(f"the state dict does not fit the model: missing {missing[:5]}, unexpected {unexpected[:5]}, other shapes {misshapen[:5]}")
        with self.lock:
            if version <= self.version:
                raise VersionConflict(f"weight version {version} is not above the current {self.version}: versions only go forward")
            # Tied embeddings: lm_head.weight is the embedding's, re-tied by loading the rest.
            self.model.load_state_dict(state, strict=False)
            self.version = version

    def render(self, body: dict[str, Any]) -> list[int]:
        if "messages" in body:
            ids = self.tokenizer.apply_chat_template(
                body["messages"],
                tools=body.get("tools") or None,
                add_generation_prompt=body.get("add_generation_prompt", True),
                tokenize=True,
                return_dict=False,
            )
            return [int(i) for i in ids]
        return [int(i) for i in self.tokenizer.encode(body["prompt"], add_special_tokens=body.get("add_special_tokens", True))]

    def forced(self, prompt: list[int]) -> list[int] | None:
        if not self.rules:
            return None
        text = self.tokenizer.decode(prompt, skip_special_tokens=False)
        for pattern, template in self.rules:
            m = pattern.search(text)
            if m:
                return [int(i) for i in self.tokenizer.encode(m.expand(template), add_special_tokens=False)] + [self.end_of_turn]
        return None

    def complete(self, prompt: list[int], max_tokens: int, temperature: float, top_p: float, seed: int | None) -> dict[str, Any]:
        """One generation; requests that arrive together are generated as one batch (as vLLM batches them)."""
        job = Job(prompt, max_tokens, temperature, top_p, torch.Generator().manual_seed(seed if seed is not None else int(time.time_ns() % 2**31)), self.forced(prompt))
        self.jobs.put(job)
        job.done.wait()
        if job.error is not None:
            raise job.error
        result = job.result
        if self.log_path:
            with self.log_lock, open(self.log_path, "a", encoding="utf-8") as f:
                f.write(json.dumps(result) + "\n")
        return result

    def serve_jobs(self) -> None:
        """The generation loop: takes every waiting request (up to --max-batch) and generates them together."""
        while True:
            batch = [self.jobs.get()]
            while len(batch) < self.max_batch:
                try:
                    batch.append(self.jobs.get_nowait())
                except queue.Empty:
                    break
            try:
                with self.lock:
                    self.generate(batch)
            except Exception as err:  # noqa: BLE001 - a failed batch fails its requests (500), the loop goes on
                for job in batch:
                    job.error = err
            for job in batch:
                job.done.set()

    @torch.no_grad()
    def prefill(self, prompts: list[list[int]]) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The batch's prompts through the model: the cache, the attention mask, each row's last position and its logits.

        The prefix every prompt shares (the system prompt and the tool list, ~500 of an episode's
        first ~550 ids) goes through once and its cache is copied to every row, as vLLM's prefix
        caching does; then the rest of each prompt, left-padded after it. Only the last position's
        logits are computed (the tied head over the whole prompt was most of the prefill)."""
        pad = self.tokenizer.pad_token_id
        # Each row keeps at least its last id out of the prefix: its logits come from that position.
        shared = min(len(os.path.commonprefix(prompts)), min(len(p) for p in prompts) - 1)
        past = None
        if shared >= MIN_SHARED_PREFIX:
            past = self.model(torch.tensor([prompts[0][:shared]]), use_cache=True, **self.last_logits_only).past_key_values
            past.batch_repeat_interleave(len(prompts))
        else:
            shared = 0
        rest = [p[shared:] for p in prompts]
        width = max(len(r) for r in rest)
        ids = torch.tensor([[pad] * (width - len(r)) + r for r in rest])
        own = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rest])
        positions = shared + (own.cumsum(-1) - 1).clamp(min=0)
        mask = torch.cat([torch.ones((len(prompts), shared), dtype=own.dtype), own], dim=1)
        out = self.model(ids, attention_mask=mask, position_ids=positions, past_key_values=past, use_cache=True, **self.last_logits_only)
        return out.past_key_values, mask, positions[:, -1:], out.logits[:, -1].float()

    @torch.no_grad()
    def generate(self, batch: list[Job]) -> None:
        """One forward pass per step for the whole batch (its shared prefix once), each row sampled with its own settings and seed."""
        pad = self.tokenizer.pad_token_id
        past, mask, last, logits = self.prefill([j.prompt for j in batch])
        generated: list[list[int]] = [[] for _ in batch]
        logprobs: list[list[float]] = [[] for _ in batch]
        finish = ["length"] * len(batch)
        live = [True] * len(batch)
        for t in range(max(j.max_tokens for j in batch)):
            logp = torch.log_softmax(logits, dim=-1)
            step: list[int] = []
            for i, job in enumerate(batch):
                if not live[i]:
                    step.append(pad)
                    continue
                if job.forced is not None:
                    token = job.forced[t] if t < len(job.forced) else self.end_of_turn
                elif job.temperature == 0:
                    token = int(torch.argmax(logp[i]))
                else:
                    token = sample(logits[i] / job.temperature, job.top_p, job.generator)
                generated[i].append(token)
                logprobs[i].append(float(logp[i, token]))
                if token in self.stop_ids:
                    finish[i], live[i] = "stop", False
                elif len(generated[i]) >= job.max_tokens:
                    live[i] = False
                step.append(token)
            if not any(live):
                break
            mask = torch.cat([mask, torch.ones((len(batch), 1), dtype=mask.dtype)], dim=1)
            last = last + 1
            out = self.model(torch.tensor(step)[:, None], attention_mask=mask, position_ids=last, past_key_values=past, use_cache=True)
            past = out.past_key_values
            logits = out.logits[:, -1].float()
        for i, job in enumerate(batch):
            text = self.tokenizer.decode(generated[i], skip_special_tokens=True)
            job.result = {"prompt_token_ids": job.prompt, "token_ids": generated[i], "logprobs": logprobs[i], "finish_reason": finish[i], "text": text, "weight_version": self.version}


class Job:
    """A completion request waiting for the generation loop."""

    def __init__(self, prompt: list[int], max_tokens: int, temperature: float, top_p: float, generator: torch.Generator, forced: list[int] | None) -> None:
        self.prompt, self.max_tokens, self.temperature, self.top_p, self.generator, self.forced = prompt, max_tokens, temperature, top_p, generator, forced
        self.done = threading.Event()
        self.result: dict[str, Any] = {}
        self.error: Exception | None = None


def sample(logits: torch.Tensor, top_p: float, generator: torch.Generator) -> int:
    probs = torch.softmax(logits, dim=-1)
    if top_p < 1:
        sorted_probs, order = torch.sort(probs, descending=True)
        keep = torch.cumsum(sorted_probs, dim=-1) - sorted_probs < top_p
        sorted_probs = sorted_probs * keep
        return int(order[torch.multinomial(sorted_probs / sorted_probs.sum(), 1, generator=generator)])
    return int(torch.multinomial(probs, 1, generator=generator))


def make_handler(engine: Engine) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
            pass

        def send(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def error(self, status: int, message: str) -> None:
            self.send(status, {"error": {"message": message, "type": "BadRequestError", "param": None, "code": status}})

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path == "/v1/models":
                self.send(200, {"object": "list", "data": [{"id": engine.name, "object": "model", "owned_by": "tiny", "max_model_len": engine.max_model_len, "weight_version": engine.version}]})
            elif self.path == "/health":
                self.send(200, {})
            else:
                self.error(404, f"no route {self.path}")

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            try:
                self.route()
            except Exception as err:  # noqa: BLE001 - a failed request answers 500, as vLLM's server does
                self.error(500, f"{type(err).__name__}: {err}")

        def route(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except json.JSONDecodeError as err:
                self.error(400, f"not JSON: {err}")
                return
            if body.get("model") not in (None, engine.name):
                self.error(404, f"The model `{body.get('model')}` does not exist.")
                return
            if self.path == "/tokenize":
                ids = engine.render(body)
                self.send(200, {"count": len(ids), "max_model_len": engine.max_model_len, "tokens": ids})
            elif self.path == "/detokenize":
                self.send(200, {"prompt": engine.tokenizer.decode(body["tokens"])})
            elif self.path == "/v1/completions":
                self.completions(body)
            elif self.path == "/update_weights":
                self.update_weights(body)
            else:
                self.error(404, f"no route {self.path}")

        def update_weights(self, body: dict[str, Any]) -> None:
            path, version = body.get("path"), body.get("version")
            if not isinstance(path, str) or not isinstance(version, int) or isinstance(version, bool):
                self.error(400, "send {path: <safetensors file>, version: <int above the current>}")
                return
            try:
                engine.update_weights(path, version)
            except VersionConflict as err:
                self.error(409, str(err))
                return
            except (OSError, ValueError) as err:
                self.error(400, f"cannot load {path}: {err}")
                return
            self.send(200, {"weight_version": engine.version})

        def completions(self, body: dict[str, Any]) -> None:
            prompt = body["prompt"]
            ids = [int(i) for i in prompt] if isinstance(prompt, list) else engine.render({"prompt": prompt})
            max_tokens = int(body.get("max_tokens") or 16)
            if not ids:
                # Refused as vLLM refuses it, before it reaches a batch (whose other requests it would fail).
                self.error(400, "The prompt cannot be empty: pass at least one token id, or some text.")
                return
            if len(ids) + max_tokens > engine.max_model_len:
                self.error(400, f"This model's maximum context length is {engine.max_model_len} tokens. However, you requested {len(ids) + max_tokens} tokens ({len(ids)} in the messages, {max_tokens} in the completion).")
                return
            r = engine.complete(ids, max_tokens, float(body.get("temperature", 1.0)), float(body.get("top_p", 1.0)), body.get("seed"))
            tokens = [engine.tokenizer.decode([i]) for i in r["token_ids"]]
            choice: dict[str, Any] = {
                "index": 0,
                "text": r["text"],
                "logprobs": {"text_offset": [], "token_logprobs": r["logprobs"], "tokens": tokens, "top_logprobs": []} if body.get("logprobs") is not None else None,
                "finish_reason": r["finish_reason"],
                "stop_reason": None,
            }
            if body.get("return_token_ids"):
                choice["token_ids"] = r["token_ids"]
                choice["prompt_token_ids"] = ids
            self.send(200, {
                "id": f"cmpl-{time.time_ns()}",
                "object": "text_completion",
                "created": int(time.time()),
                "model": engine.name,
                "choices": [choice],
                "usage": {"prompt_tokens": len(ids), "completion_tokens": len(r["token_ids"]), "total_tokens": len(ids) + len(r["token_ids"])},
                "weight_version": r["weight_version"],
            })

    return Handler


class Server(ThreadingHTTPServer):
    # http.server listens with a backlog of 5: a trainer opening 64 connections at once has most of
    # their SYNs dropped, and a dropped SYN is retried after 1, 2, 4… s (a request then took 130 s).
    request_queue_size = 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=8000, help="0: any free port")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--model", default="tiny-qwen", help="the name it serves the model under")
    parser.add_argument("--max-model-len", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=0, help="the random weights' seed")
    parser.add_argument("--max-batch", type=int, default=32, help="completions generated together at most")
    parser.add_argument("--hidden-size", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--script", help="JSON rules: [{match, text}] forcing what the model says where the prompt matches")
    parser.add_argument("--log", help="append every completion as produced (JSON lines)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    engine = Engine(args)
    server = Server((args.host, args.port), make_handler(engine))
    print(f"READY http://{args.host}:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
