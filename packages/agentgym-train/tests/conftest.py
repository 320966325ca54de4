from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# Text the test tokenizers learn from: env-like observations and replies (enough for BPE merges).
CORPUS = [
    "You are playing guess the number. Reply with your reasoning, then one line: Action: guess <number>",
    "I am thinking of a number between 1 and 100. Higher. Lower. Correct!",
    "Thought: The middle of 1..100 is 50.\nAction: guess 50",
    "Your goal: go to the red ball. Available actions: turn left, turn right, move forward, go to red ball 1",
] * 20

LLAMA3_TEMPLATE = (
    "{{- bos_token }}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] + '<|eot_id|>' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"
)


@pytest.fixture(scope="session")
def chatml_tokenizer():
    from agentgym_train.models.tiny import train_tokenizer

    return train_tokenizer(CORPUS, vocab_size=400)


@pytest.fixture(scope="session")
def llama3_tokenizer():
    """A Llama-3-style tokenizer: its special tokens, BOS, and its chat template (built locally)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = [
        "<|begin_of_text|>",
        "<|end_of_text|>",
        "<|start_header_id|>",
        "<|end_header_id|>",
        "<|eot_id|>",
    ]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        CORPUS,
        trainers.BpeTrainer(
            vocab_size=400,
            special_tokens=specials,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|begin_of_text|>",
        eos_token="<|end_of_text|>",
        pad_token="<|end_of_text|>",
    )
    fast.chat_template = LLAMA3_TEMPLATE
    return fast


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """A nano tiny model directory (tokenizer trained on CORPUS: no expert episodes, fast)."""
    from agentgym_train.models.tiny import build_tiny

    return build_tiny(tmp_path_factory.mktemp("tiny"), texts=CORPUS, vocab_size=400, size="nano")


AGENTGYM = str(Path(sys.executable).parent / "agentgym")


def _run_recipe(cwd: Path, demo: str, *overrides: str) -> tuple[subprocess.CompletedProcess, dict]:
    """``agentgym train --demo DEMO`` on a few tasks, in ``cwd``: the process and the recipe's report."""
    few = [
        "sft.max_len=1024",
        "steps=1",
        "n=2",
        "horizon=fixed",  # 2 turns: the recipes' first horizons (7-8 turns of 8,192 tokens on WebArena) cost minutes here
        "horizon_params={horizon: 2}",
        "val_limit=2",
        "val_n=1",
        "val_max_turns=2",
        "max_new_tokens=16",
        "curve_tasks=2",  # a recipe that draws a curve draws it on 2 test tasks here
    ]
    out = subprocess.run(
        [AGENTGYM, "train", "--demo", demo, *few, *overrides],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=cwd,
    )
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    return out, json.loads((cwd / "runs" / f"demo-{demo}" / "recipe_report.json").read_text())


@pytest.fixture
def recipe_run():
    """``agentgym train --demo DEMO KEY=VALUE...`` on a few tasks in a folder: its process and report."""
    return _run_recipe
