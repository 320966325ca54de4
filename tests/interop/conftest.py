"""Fixtures of the interop tests (marker ``interop``, hatch environment ``interop``): the tiny model
and a third-party plugin, the package ``agentgym new-env`` writes, loaded with no code of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentgym.testing import import_or_skip

#: The scaffold's env name: a third-party plugin as a plugin author gets it from ``agentgym new-env``.
SCAFFOLD = "interopsort"


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model built locally (tokenizer from BabyAI and TextCraft expert text, random weights)."""
    from agentgym_train.models.tiny import build_tiny
    from agentgym_train.rollout.experts import expert_texts

    return build_tiny(
        tmp_path_factory.mktemp("tiny"), expert_texts(("babyai", "textcraft"), 20), size="micro"
    )


@pytest.fixture(scope="session")
def scaffold_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The env of a package written by ``agentgym new-env``, importable here and in child processes
    (``PYTHONPATH`` and ``AGENTGYM_PLUGIN_MODULES``), as if pip-installed."""
    from agentgym.plugins import reset_registry

    root = tmp_path_factory.mktemp("plugin")
    made = subprocess.run(
        [sys.executable, "-m", "agentgym", "new-env", SCAFFOLD, "--dir", str(root)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    src = str(root / f"agentgym-env-{SCAFFOLD}" / "src")
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "AGENTGYM_PLUGIN_MODULES")}
    sys.path.insert(0, src)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (src, saved["PYTHONPATH"]) if p)
    os.environ["AGENTGYM_PLUGIN_MODULES"] = ",".join(
        p for p in (f"agentgym_{SCAFFOLD}.plugin", saved["AGENTGYM_PLUGIN_MODULES"]) if p
    )
    reset_registry()
    try:
        yield SCAFFOLD
    finally:
        sys.path.remove(src)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        reset_registry()


#: BabyAI tasks the expert solves with one ``go to red ball 1`` (the first three of the test split).
RED_BALL_TASKS = [0, 1, 2, 8, 400000, 400001, 400002]
RED_BALL_REPLY = "Thought: I go to it.\nAction: go to red ball 1"


@pytest.fixture(scope="session")
def react_model(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model taught one reply by TRL's SFTTrainer: ``Action: go to red ball 1`` on BabyAI's
    red-ball tasks, under our system prompt and first observation (what a rollout sends). Its
    episodes then step the env for real: solved red-ball tasks, actions the env refuses elsewhere."""
    import_or_skip("trl")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import agentgym
    from agentgym.prompting import system_prompt

    spec = agentgym.env_specs()["babyai"]
    env = agentgym.make("babyai")
    rows = []
    for task_id in RED_BALL_TASKS:
        observation, info = env.reset(options={"task_id": task_id})
        rows.append(
            {
                "prompt": [
                    {"role": "system", "content": system_prompt(spec, info)},
                    {"role": "user", "content": observation},
                ],
                "completion": [{"role": "assistant", "content": RED_BALL_REPLY}],
            }
        )
    out = tmp_path_factory.mktemp("react-model")
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    teach(model, tokenizer, rows * 6, out / "sft", steps=60)
    model.save_pretrained(out / "model")
    tokenizer.save_pretrained(out / "model")
    return out / "model"


def teach(model: Any, tokenizer: Any, rows: list[dict[str, Any]], out: Path, steps: int) -> None:
    """A short SFT by TRL's own ``SFTTrainer`` on prompt/completion ``rows`` (loss on completions)."""
    from agentgym_train.models.device import native_bf16
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    config = SFTConfig(
        # TRL's configs default to bf16=True: where the CPU only emulates it (AVX2) a step of the
        # tiny model took ~5 s and test_trl.py's `primed` fixture ran past its timeout (.ci/run on
        # an AVX2-only EPYC)
        bf16=native_bf16("cpu"),
        output_dir=str(out),
        max_steps=steps,
        per_device_train_batch_size=4,
        learning_rate=3e-3,
        max_length=None,
        completion_only_loss=True,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        seed=0,
    )
    SFTTrainer(
        model=model, processing_class=tokenizer, train_dataset=Dataset.from_list(rows), args=config
    ).train()


@pytest.fixture(scope="session")
def sft_teacher() -> Any:
    """:func:`teach`, for test modules (conftest is no importable module under importlib mode)."""
    return teach
