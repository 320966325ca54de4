"""The overlong punishment through the registry: on planted replies, and as the reward of two RL
steps of the tiny model, found by name as any run finds a reward transform."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentgym.rewards import apply_reward_transform
from agentgym.trajectory import Episode, Step

TEXTS = [
    "You are playing guess the number. Reply with one line: Action: guess <number>",
    "Thought: The middle of 1..100 is 50.\nAction: guess 50",
    "Higher. Lower. Correct!",
] * 20


def test_replies_within_the_budget_cost_nothing_and_longer_ones_up_to_the_penalty():
    replies = ["x" * 5, "x" * 8, "x" * 9, "x" * 10, "x" * 30]
    episode = Episode(env="guess", task_id=0, steps=[Step(raw_output=r, reward=0.5) for r in replies])
    got = apply_reward_transform("overlong_penalty", episode, max_chars=10, cache_chars=4, penalty=2.0)
    assert got == pytest.approx([0.5, 0.5 - 1.0, 0.5 - 1.5, 0.5 - 2.0, 0.5 - 2.0])
    with pytest.raises(ValueError, match="cache_chars <= max_chars"):
        apply_reward_transform("overlong_penalty", episode, max_chars=3, cache_chars=4)


def test_the_tiny_model_trains_on_it(tmp_path):
    from agentgym_train.models.tiny import build_tiny
    from agentgym_train.rl.config import TrainConfig
    from agentgym_train.rl.trainer import run

    model = build_tiny(tmp_path / "tiny", texts=TEXTS, vocab_size=300, size="nano")
    config = Path(__file__).with_name("tiny_run.yaml")
    steps: list[dict] = []
    run(TrainConfig.load(config, [f"model={model}", f"runs_dir={tmp_path / 'runs'}"]), on_step=steps.append)
    # the replies' punishments differ within a group, so GRPO has advantages to train on
    assert all(s["trained_tokens"] > 0 and s["zero_adv_skipped"] < 1 for s in steps), steps
