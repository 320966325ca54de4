"""Advantage estimators and policy-gradient losses over multi-turn token sequences.

Tensors are ``B x T``: one row per episode, the whole conversation (prompt, every reply,
every observation). ``mask`` is the loss mask: 1 exactly on sampled tokens. The episode's reward
sits on its last sampled token (``reward_index``), never on an observation token, so nothing
that reads rewards along the mask drops it (the reference put it on the final observation token,
where GAE and REINFORCE++ lost it).

Estimators follow verl's ``core_algos`` (same arguments, same results on single-turn layouts, a
parity test in the ``verl`` hatch environment checks it). Along a multi-turn row, the recurrences
(discounted returns, GAE) step from one sampled token to the previous *sampled* token: observation
tokens are skipped, not treated as the end of the episode.

The registry of algorithms (``AlgorithmSpec``, the ``agentgym_algorithms`` hook) is in
:mod:`agentgym_train.rl.specs`, which does not import torch.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from agentgym.errors import AgentGymError, UnknownNameError

# -- helpers -------------------------------------------------------------------------------------


def masked_mean(values: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    if dim is None:
        return (values * mask).sum() / mask.sum().clamp(min=1)
    return (values * mask).sum(dim) / mask.sum(dim).clamp(min=1)


def masked_whiten(values: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Zero mean, unit variance over the masked entries (unbiased variance, as verl)."""
    mean = masked_mean(values, mask)
    centred = values - mean
    n = mask.sum()
    var = masked_mean(centred**2, mask)
    if n > 1:
        var = var * n / (n - 1)
    return centred * torch.rsqrt(var + eps)


def token_rewards(scores: torch.Tensor, reward_index: Sequence[int], width: int) -> torch.Tensor:
    """``B x width`` zeros with each episode's score on its last sampled token."""
    out = torch.zeros(len(scores), width, dtype=torch.float32)
    rows = torch.arange(len(scores))
    out[rows, torch.as_tensor(list(reward_index), dtype=torch.long)] = scores.float()
    return out


def _groups(index: Sequence[Any]) -> dict[Any, list[int]]:
    groups: dict[Any, list[int]] = defaultdict(list)
    for i, key in enumerate(index):
        groups[key].append(i)
    return groups


# -- advantage estimators ------------------------------------------------------------------------


def grpo_advantages(
    token_level_rewards: torch.Tensor,
    mask: torch.Tensor,
    index: Sequence[Any],
    epsilon: float = 1e-6,
    norm_by_std: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GRPO: each episode's score against its group's (same task) mean, over the group's std."""
    scores = token_level_rewards.sum(-1)
    adv = torch.zeros_like(scores)
    for rows in _groups(index).values():
        s = scores[rows]
        if len(rows) == 1:
            mean, std = torch.tensor(0.0), torch.tensor(1.0)
        else:
            mean, std = s.mean(), s.std()
        adv[rows] = (s - mean) / (std + epsilon) if norm_by_std else s - mean
    adv = adv.unsqueeze(-1) * mask
    return adv, adv


def rloo_advantages(
    token_level_rewards: torch.Tensor, mask: torch.Tensor, index: Sequence[Any]
) -> tuple[torch.Tensor, torch.Tensor]:
    """RLOO: each episode's score minus the mean of the other episodes of its group."""
    scores = token_level_rewards.sum(-1)
    adv = scores.clone()
    for rows in _groups(index).values():
        n = len(rows)
        if n > 1:
            s = scores[rows]
            adv[rows] = s * n / (n - 1) - s.mean() * n / (n - 1)
    adv = adv.unsqueeze(-1) * mask
    return adv, adv


def _discounted_returns(rewards: torch.Tensor, mask: torch.Tensor, gamma: float) -> torch.Tensor:
    """Return-to-go over sampled tokens; observation tokens carry the running return through."""
    returns = torch.zeros_like(rewards)
    running = torch.zeros(rewards.shape[0])
    for t in reversed(range(rewards.shape[1])):
        m = mask[:, t]
        # on a sampled token: r_t + gamma * (return of the next sampled token)
        running = torch.where(m > 0, rewards[:, t] + gamma * running, running)
        returns[:, t] = running * m
    return returns


def reinforce_pp_advantages(
    token_level_rewards: torch.Tensor, mask: torch.Tensor, gamma: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """REINFORCE++: discounted return-to-go per token, whitened over the batch."""
    returns = _discounted_returns(token_level_rewards, mask, gamma)
    adv = masked_whiten(returns, mask) * mask
    return adv, returns


def reinforce_pp_baseline_advantages(
    token_level_rewards: torch.Tensor, mask: torch.Tensor, index: Sequence[Any], epsilon: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor]:
    """REINFORCE++ with a group baseline: score minus group mean, whitened over the batch."""
    scores = token_level_rewards.sum(-1)
    centred = scores.clone()
    for rows in _groups(index).values():
        if len(rows) > 1:
            centred[rows] = scores[rows] - scores[rows].mean()
    adv = masked_whiten(centred.unsqueeze(-1) * mask, mask) * mask
    return adv, adv


def gae_advantages(
    token_level_rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    gamma: float = 1.0,
    lam: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE over the sampled tokens (observation tokens skipped); advantages whitened."""
    B, T = token_level_rewards.shape
    next_value = torch.zeros(B)
    last_gae = torch.zeros(B)
    adv = torch.zeros(B, T)
    for t in reversed(range(T)):
        m = mask[:, t]
        delta = token_level_rewards[:, t] + gamma * next_value - values[:, t]
        gae_t = delta + gamma * lam * last_gae
        next_value = torch.where(m > 0, values[:, t], next_value)
        last_gae = torch.where(m > 0, gae_t, last_gae)
        adv[:, t] = gae_t * m
    returns = (adv + values) * mask
    return masked_whiten(adv, mask) * mask, returns


@dataclass(frozen=True)
class Turn:
    """One model turn of a row: its sampled tokens ``[start, end)``, the state it acted in
    (``anchor``: equal anchors in one group are the same state) and the reward paid for it (the
    episode's score is the sum of its turns' rewards)."""

    start: int
    end: int
    anchor: str
    reward: float = 0.0


def turn_returns(rewards: Sequence[float], gamma: float) -> list[float]:
    """Each turn's discounted return: ``r_t + gamma * r_{t+1} + gamma^2 * r_{t+2} ...``."""
    out, running = [0.0] * len(rewards), 0.0
    for t in reversed(range(len(rewards))):
        running = rewards[t] + gamma * running
        out[t] = running
    return out


def _normalised(values: torch.Tensor, epsilon: float, norm_by_std: bool) -> torch.Tensor:
    """Values against their mean (over their std, unbiased, when ``norm_by_std``); a single value
    gets 0."""
    if len(values) == 1:
        return torch.zeros_like(values)
    centred = values - values.mean()
    return centred / (values.std() + epsilon) if norm_by_std else centred


def step_groups(index: Sequence[Any], turns: Sequence[Sequence[Turn]]) -> dict[Any, list[tuple[int, int]]]:
    """GiGPO's step groups: the ``(row, turn)`` pairs of one episode group (one task) whose
    anchors are equal. Rows of different groups never share a step group."""
    out: dict[Any, list[tuple[int, int]]] = defaultdict(list)
    for row, (group, row_turns) in enumerate(zip(index, turns, strict=True)):
        for t, turn in enumerate(row_turns):
            out[(group, turn.anchor)].append((row, t))
    return out


def gigpo_advantages(
    token_level_rewards: torch.Tensor,
    mask: torch.Tensor,
    index: Sequence[Any],
    turns: Sequence[Sequence[Turn]],
    *,
    gamma: float = 0.95,
    omega: float = 1.0,
    epsilon: float = 1e-6,
    norm_by_std: bool = True,
    step_norm_by_std: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GiGPO (Feng et al. 2025, arXiv 2505.10978): GRPO's episode-level advantage plus ``omega``
    times a step-level one. Within a group, the turns whose anchor states are equal form a step
    group; each turn's discounted return (``gamma``) is centred within its step group (a singleton
    gets 0), and divided by the step group's std when ``step_norm_by_std``. A turn's advantage
    lands on its sampled tokens. Returns the advantages, and the same again as returns.

    The episode level follows the paper's Eq. 3 (one score per episode); the public reference
    implementation (verl-agent) by default takes the group's mean over every turn's copy of the
    score instead, which weighs long episodes more. Its default at both levels is ``mean_norm``
    (no division by the std): here the episode level is GRPO's (``norm_by_std``, as ``grpo``) and
    the step level the reference's (a step group of two returns 0.95**3 and 0.95**4 would
    otherwise get -0.7 and +0.7, as much credit as a success against a failure)."""
    episode, _ = grpo_advantages(token_level_rewards, mask, index, epsilon, norm_by_std)
    step = torch.zeros_like(mask)
    returns = [turn_returns([t.reward for t in row], gamma) for row in turns]
    for members in step_groups(index, turns).values():
        values = torch.tensor([returns[r][t] for r, t in members], dtype=torch.float32)
        for (r, t), a in zip(members, _normalised(values, epsilon, step_norm_by_std).tolist(), strict=True):
            turn = turns[r][t]
            step[r, turn.start : turn.end] = a
    adv = episode + omega * step * mask
    return adv, adv


def anchor_coverage(index: Sequence[Any], turns: Sequence[Sequence[Turn]]) -> float:
    """The share of turns in step groups of two or more (0 when there are no turns)."""
    members = list(step_groups(index, turns).values())
    total = sum(len(m) for m in members)
    return sum(len(m) for m in members if len(m) > 1) / total if total else 0.0


# -- losses --------------------------------------------------------------------------------------

KL_KINDS = ("k1", "k2", "low_var_kl", "abs")


def kl_penalty(logprob: torch.Tensor, ref_logprob: torch.Tensor, kind: str) -> torch.Tensor:
    """Per-token KL estimate between the policy and the reference, from sampled-token logprobs.

    ``k1``: log ratio; ``k2``: half its square; ``low_var_kl`` (Schulman's k3): ``r - log r - 1``
    with ``r = p_ref / p``, clamped as verl does; ``abs``: absolute log ratio.
    """
    diff = logprob - ref_logprob
    if kind == "k1":
        return diff
    if kind == "k2":
        return 0.5 * diff.square()
    if kind == "abs":
        return diff.abs()
    if kind == "low_var_kl":
        kl = torch.clamp(ref_logprob - logprob, min=-20, max=20)
        return torch.clamp(torch.exp(kl) - kl - 1, min=-10, max=10)
    raise UnknownNameError(kind="KL estimator", name=kind, known=KL_KINDS)


AGG_MODES = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean")


def agg_loss(
    loss_mat: torch.Tensor,
    mask: torch.Tensor,
    mode: str,
    *,
    tokens: float | None = None,
    seqs: float | None = None,
) -> torch.Tensor:
    """Reduce a ``B x T`` loss to a scalar. ``tokens``/``seqs``: the whole batch's masked token
    and sequence counts when ``loss_mat`` is one micro-batch of it, so that the micro-batches'
    losses add up to the loss of the whole batch (gradient accumulation stays exact)."""
    if mode == "token-mean":
        return (loss_mat * mask).sum() / (tokens if tokens is not None else mask.sum().clamp(min=1))
    if mode == "seq-mean-token-sum":
        per_seq = (loss_mat * mask).sum(-1)
    elif mode == "seq-mean-token-mean":
        per_seq = (loss_mat * mask).sum(-1) / mask.sum(-1).clamp(min=1)
    else:
        raise UnknownNameError(kind="loss aggregation", name=mode, known=AGG_MODES)
    # fully masked rows do not count as sequences (as verl)
    return per_seq.sum() / (seqs if seqs is not None else (mask.sum(-1) > 0).sum().clamp(min=1))


def policy_loss(
    old_logprob: torch.Tensor,
    logprob: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_ratio: float = 0.2,
    clip_ratio_high: float | None = None,
    clip_ratio_c: float = 3.0,
    agg: str = "token-mean",
    tokens: float | None = None,
    seqs: float | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """PPO's clipped surrogate (with dual clip for negative advantages, as verl). Returns the loss
    and ``clip_frac`` / ``approx_kl`` over the masked tokens."""
    high = clip_ratio if clip_ratio_high is None else clip_ratio_high
    log_ratio = torch.clamp(logprob - old_logprob, min=-20.0, max=20.0)
    ratio = torch.exp(log_ratio)
    loss1 = -advantages * ratio
    loss2 = -advantages * torch.clamp(ratio, 1 - clip_ratio, 1 + high)
    clipped = torch.maximum(loss1, loss2)
    dual = torch.minimum(-advantages * clip_ratio_c, clipped)
    losses = torch.where(advantages < 0, dual, clipped)
    stats = {
        "clip_frac": masked_mean(torch.gt(loss2, loss1).float(), mask).detach(),
        "approx_kl": masked_mean(-log_ratio, mask).detach(),
    }
    return agg_loss(losses, mask, agg, tokens=tokens, seqs=seqs), stats


def value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip: float = 0.5,
    agg: str = "token-mean",
    tokens: float | None = None,
    seqs: float | None = None,
) -> torch.Tensor:
    """The critic's clipped squared error (half of it, as verl)."""
    clipped = old_values + torch.clamp(values - old_values, -clip, clip)
    losses = 0.5 * torch.maximum((values - returns).square(), (clipped - returns).square())
    return agg_loss(losses, mask, agg, tokens=tokens, seqs=seqs)


# -- estimators as the registry calls them: (batch, **params) -> (advantages, returns) ------------


@dataclass
class Batch:
    """What an estimator may read: token rewards, the loss mask, group ids, critic values, and
    each row's turns (:class:`Turn`, for turn-level estimators such as ``gigpo``)."""

    token_level_rewards: torch.Tensor
    mask: torch.Tensor
    index: list[Any]
    values: torch.Tensor | None = None
    turns: list[list[Turn]] | None = None


def grpo(b: Batch, epsilon: float = 1e-6, norm_by_std: bool = True, **_: Any):
    return grpo_advantages(b.token_level_rewards, b.mask, b.index, epsilon, norm_by_std)


def rloo(b: Batch, **_: Any):
    return rloo_advantages(b.token_level_rewards, b.mask, b.index)


def reinforce_pp(b: Batch, gamma: float = 1.0, **_: Any):
    return reinforce_pp_advantages(b.token_level_rewards, b.mask, gamma)


def reinforce_pp_baseline(b: Batch, epsilon: float = 1e-6, **_: Any):
    return reinforce_pp_baseline_advantages(b.token_level_rewards, b.mask, b.index, epsilon)


def gae(b: Batch, gamma: float = 1.0, lam: float = 1.0, **_: Any):
    if b.values is None:
        raise AgentGymError("gae needs critic values")
    return gae_advantages(b.token_level_rewards, b.values, b.mask, gamma, lam)


def gigpo(
    b: Batch,
    gamma: float = 0.95,
    omega: float = 1.0,
    epsilon: float = 1e-6,
    norm_by_std: bool = True,
    step_norm_by_std: bool = False,
    **_: Any,
):
    if b.turns is None:
        raise AgentGymError("gigpo needs each row's turns (Batch.turns)")
    return gigpo_advantages(
        b.token_level_rewards,
        b.mask,
        b.index,
        b.turns,
        gamma=gamma,
        omega=omega,
        epsilon=epsilon,
        norm_by_std=norm_by_std,
        step_norm_by_std=step_norm_by_std,
    )
