"""A real run for the viewer's tests: the native trainer's output (2 GRPO steps of a nano model on
BabyAI, with token sequences) plus the scripted expert's evaluation report and episodes beside it,
and an episodes file whose texts try to inject HTML."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

# The index of every viewer the tests start goes to a throw-away cache, never ~/.cache.
os.environ.setdefault("AGENTGYM_VIEWER_CACHE", tempfile.mkdtemp(prefix="agentgym-viewer-cache-"))


def make_run(root: Path) -> Path:
    """``root/runs/demo``: a native run (config.yaml, metrics.jsonl, episodes/, report.json, model/)
    with ``eval.json`` + ``eval.episodes.jsonl`` of the BabyAI expert beside it."""
    from agentgym_train.models.tiny import build_tiny
    from agentgym_train.policies import make_policy
    from agentgym_train.rl.config import TrainConfig
    from agentgym_train.rl.trainer import Trainer
    from agentgym_train.rollout.evaluate import evaluate
    from agentgym_train.rollout.experts import expert_texts

    from agentgym.trajectory import write_episodes

    model = build_tiny(root / "tiny", expert_texts(("babyai",), 20), vocab_size=600, size="nano")
    cfg = TrainConfig.from_dict(
        {
            "name": "demo",
            "runs_dir": str(root / "runs"),
            "model": str(model),
            "envs": ["babyai"],
            "steps": 2,
            "tasks_per_step": 2,
            "n": 2,
            "max_new_tokens": 12,
            "horizon": "scaling_inter",
            "horizon_params": {"rounds": [2, 3], "every": 1},
            "val_limit": 2,
            "val_n": 1,
            "micro_batch_tokens": 512,
            "progress": False,
        }
    )
    trainer = Trainer(cfg)
    trainer.setup()
    try:
        trainer.train()
    finally:
        trainer.close()
    run = root / "runs" / "demo"
    report, episodes = evaluate(["babyai"], make_policy("scripted"), split="test", limit=6, max_turns=20)
    report["policy"] = "scripted"
    (run / "eval.json").write_text(json.dumps(report, indent=2))
    write_episodes(run / "eval.episodes.jsonl", episodes)
    return run


def make_hostile(root: Path) -> Path:
    """An episodes file whose model output and observation carry markup and a script."""
    from agentgym.trajectory import Episode, Step, write_episodes

    evil = '<script>window.pwned = 1</script><img src=x onerror="window.pwned=2">'
    episode = Episode(
        env="guess",
        task_id=1,
        split="test",
        policy="scripted",
        messages=[{"role": "user", "content": f"Question {evil}"}],
        steps=[Step(raw_output=f"Action: guess 5 {evil}", action=f"guess 5 {evil}", observation=evil)],
        num_turns=1,
        termination="failure",
    )
    path = root / "hostile" / "episodes.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_episodes(path, [episode])
    return path


@pytest.fixture(scope="session")
def sample_run(tmp_path_factory) -> Path:
    return make_run(tmp_path_factory.mktemp("viewer"))


@pytest.fixture(scope="session")
def hostile_episodes(tmp_path_factory) -> Path:
    return make_hostile(tmp_path_factory.mktemp("hostile"))
