"""Dr. GRPO through the registry: its advantage on a known batch, and two RL steps of the tiny
model trained with it, found by name as any run finds an algorithm."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from agentgym_train.rl.algorithms import Batch, grpo_advantages
from agentgym_train.rl.config import TrainConfig
from agentgym_train.rl.specs import get_algorithm
from agentgym_train.rl.trainer import run

from agentgym import hookimpl
from agentgym.plugins import get_registry

TEXTS = [
    "You are playing guess the number. Reply with one line: Action: guess <number>",
    "Thought: The middle of 1..100 is 50.\nAction: guess 50",
    "Higher. Lower. Correct!",
] * 20


def test_the_advantage_is_the_score_minus_the_group_mean_on_sampled_tokens():
    mask = torch.tensor([[0, 1, 1, 0], [0, 1, 0, 0], [1, 1, 1, 1], [0, 0, 1, 1]], dtype=torch.float)
    rewards = torch.zeros(4, 4)
    rewards[0, 2], rewards[1, 1], rewards[2, 3], rewards[3, 3] = 1.0, 0.0, 0.0, 0.5
    spec = get_algorithm("drgrpo")  # the registry's: the plugin is installed
    adv, returns = spec.estimator()(Batch(rewards, mask, index=["a", "a", "b", "b"]), **spec.params)
    expected = torch.tensor([0.5, -0.5, -0.25, 0.25])[:, None] * mask
    assert torch.equal(adv, expected) and torch.equal(returns, expected)
    # GRPO's without its std division, exactly
    assert torch.equal(adv, grpo_advantages(rewards, mask, ["a", "a", "b", "b"], norm_by_std=False)[0])
    assert spec.needs_groups and not spec.needs_critic


class ReplyLength:
    """A reward with spread among an untrained model's samples: shorter replies score higher."""

    @hookimpl
    def agentgym_reward_transforms(self):
        return {"test_short_replies": lambda episode: [-len(s.raw_output) / 100 for s in episode.steps]}


@pytest.fixture
def short_replies():
    get_registry().pm.register(ReplyLength(), name="test-short-replies")
    yield "test_short_replies"
    get_registry().pm.unregister(name="test-short-replies")


def test_the_tiny_model_trains_with_it(tmp_path, short_replies):
    from agentgym_train.models.tiny import build_tiny

    model = build_tiny(tmp_path / "tiny", texts=TEXTS, vocab_size=300, size="nano")
    where = [f"model={model}", f"runs_dir={tmp_path / 'runs'}", f"reward={short_replies}"]
    steps: list[dict] = []
    report = run(TrainConfig.load(Path(__file__).with_name("tiny_run.yaml"), where), on_step=steps.append)
    assert report["algorithm"] == "drgrpo" and report["steps"] == 2
    # the replies' lengths differ, so Dr. GRPO's advantages do, and the model was updated on them
    assert all(s["trained_tokens"] > 0 and s["zero_adv_skipped"] < 1 for s in steps), steps
    assert any(s["grad_norm"] > 0 for s in steps)
