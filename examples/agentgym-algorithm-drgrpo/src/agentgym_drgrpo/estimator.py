"""Dr. GRPO's advantage (Liu et al. 2025, "Understanding R1-Zero-Like Training: A Critical
Perspective"): GRPO without the division by the group's standard deviation, which gives the
groups of tasks the model almost always (or almost never) solves the largest advantages."""

from __future__ import annotations

import torch
from agentgym_train.rl.algorithms import Batch


def drgrpo(batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    """Every sampled token of a row gets its episode's score minus the mean score of its group
    (the samples of one task); tokens the model did not sample get 0. ``(advantages, returns)``,
    both ``B x T``: an outcome-only estimator returns its advantages twice (no critic reads them)."""
    # the score sits on the row's last sampled token, 0 elsewhere: a row's sum is its score
    scores = batch.token_level_rewards.sum(dim=1)
    advantage = torch.zeros_like(scores)
    groups: dict[object, list[int]] = {}
    for row, group in enumerate(batch.index):
        groups.setdefault(group, []).append(row)
    for rows in groups.values():
        advantage[rows] = scores[rows] - scores[rows].mean()
    advantages = advantage[:, None] * batch.mask
    return advantages, advantages
