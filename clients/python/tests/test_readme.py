"""The docs' "One command per trainer" (docs/how-to/export.md): every block, shell and Python, runs as written, in order, in an empty folder.

`npx agent` is this checkout's CLI; a tiny Llama with a word-level tokenizer and a chat template
that knows tools, built from a config and saved here, stands in for MODEL (no weights can be
downloaded). Skipped, saying why, where TRL and torch cannot be installed.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO

pytest.importorskip("trl", reason="TRL is not installed: pip install trl torch pandas to run the export page's trainer blocks")
pytest.importorskip("torch", reason="torch is not installed: pip install torch")

TEMPLATE = (
    "{% if tools %}{% for t in tools %}tool {{ t.function.name }} {% endfor %}{% endif %}"
    "{% for m in messages %}<{{ m.role }}> {{ m.content or '' }}"
    "{% if m.tool_calls %}{% for c in m.tool_calls %} call {{ c.function.name }} {{ c.function.arguments }}{% endfor %}{% endif %} <eos> "
    "{% endfor %}{% if add_generation_prompt %}<assistant> {% endif %}"
)


def trainer_blocks() -> list[tuple[str, str]]:
    page = (REPO / "docs" / "how-to" / "export.md").read_text()
    # From "One command per trainer" to the page's end: SFT, verl and OpenAI fine-tuning, in order.
    section = page[page.index("## One command per trainer") :]
    return re.findall(r"```(sh|python)\n(.*?)```", section, flags=re.S)


def tiny_model(where: Path) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = ["<pad>", "<eos>", "<unk>", "<system>", "<user>", "<assistant>", "<tool>", "tool", "call"]
    core = Tokenizer(models.WordLevel({t: i for i, t in enumerate(vocab)}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>", chat_template=TEMPLATE)
    config = LlamaConfig(
        vocab_size=len(vocab), hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
        max_position_embeddings=16_384, pad_token_id=0, eos_token_id=1, bos_token_id=1,
    )
    LlamaForCausalLM(config).save_pretrained(where)
    tokenizer.save_pretrained(where)
    return where


def test_trainer_blocks_run_as_written(tmp_path: Path) -> None:
    blocks = trainer_blocks()
    assert [lang for lang, _ in blocks].count("python") >= 3, "the export page's trainer section lost its blocks"
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "MODEL": str(tiny_model(tmp_path / "model")), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    shim = f'npx() {{ [ "$1" = agent ] || return 2; shift; node {REPO / "bin" / "agent.js"} "$@"; }}\n'
    # A Python block ends without the interpreter's teardown once it has run: pyarrow's thread pool
    # sometimes aborts the process there ("terminate called without an active exception", SIGABRT,
    # apache/arrow#34314) after the block did its work; a block that raises still exits 1 before it.
    ending = "\nimport os as _os, sys as _sys\n_sys.stdout.flush()\n_sys.stderr.flush()\n_os._exit(0)\n"
    for lang, body in blocks:
        command = ["bash", "-e", "-c", shim + body] if lang == "sh" else [sys.executable, "-c", body + ending]
        done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"docs/how-to/export.md {lang} block failed:\n{body}\n{done.stderr[-3000:]}"
    assert (work / "runs" / "sft-model").is_dir()
    assert (work / "runs" / "openai-ft.jsonl").read_text().count("\n") == 2
