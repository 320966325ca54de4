"""One RL step, top to bottom: roll out, token batch, advantages, epochs of mini-batches, the loss
of each micro-batch, the optimizer step.

The step reads the run's config, its episodes' source (:class:`~agentgym_train.rl.groups.StepGroups`:
``n`` samples of each drawn task, played by the policy being trained), the learner (the model, its
frozen reference, an optional critic head and the optimizer: :class:`~agentgym_train.rl.learner.Learner`)
and the algorithm's estimator. What is not the step stays out of it: checkpoints, validation,
tracking and the weight sync to a rollout engine are the trainer's (:mod:`agentgym_train.rl.trainer`).
It calls pure functions: token batches and advantages (:mod:`agentgym_train.rl.batch`), estimators
and loss terms (:mod:`agentgym_train.rl.algorithms`, held to verl's by parity tests).

Gradient accumulation is exact: every micro-batch's loss is normalised by its whole mini-batch's
token or sequence count, so the gradients summed over the micro-batches are the mini-batch's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from agentgym.trajectory import Episode
from agentgym_train.models.logprobs import micro_batches
from agentgym_train.rl.algorithms import agg_loss, kl_penalty, policy_loss, value_loss
from agentgym_train.rl.batch import Estimator, TokenBatch, advantages, informative_rows
from agentgym_train.rl.config import TrainConfig
from agentgym_train.rl.groups import StepGroups
from agentgym_train.rl.learner import Learner, Scores
from agentgym_train.rl.shared_prefix import SharedPrefix, prompt_groups
from agentgym_train.rollout.engine import RolloutStats

STAT_KEYS = ("pg_loss", "kl", "entropy", "clip_frac", "value_loss")


@dataclass
class StepResult:
    episodes: list[Episode]
    rollout: RolloutStats
    rollout_s: float  # seconds of the rollout (``rollout`` has the engine's own split of them)
    drawn: dict[str, Any]  # the drawn tasks' estimated pass rate, the share of groups without spread
    update: dict[str, Any]  # the update's statistics (none when no episode could be trained on)


def rl_step(
    step: int,
    horizon: int,
    source: StepGroups,
    learner: Learner,
    estimator: Estimator,
    cfg: TrainConfig,
    keep: Callable[[list[Episode]], None] = lambda episodes: None,
) -> StepResult:
    """Training step ``step``, its turns capped at ``horizon``; ``keep`` gets its episodes as soon
    as they are played (the run's episode file: a crash in the update does not lose them)."""
    # 1. roll out: n samples of each drawn task (more tasks under dynamic sampling)
    t0 = time.perf_counter()
    episodes, rollout, drawn = source.sample(step, horizon)
    rollout_s = time.perf_counter() - t0
    keep(episodes)
    return StepResult(episodes, rollout, rollout_s, drawn, learn(episodes, learner, estimator, cfg))


def learn(
    episodes: list[Episode], learner: Learner, estimator: Estimator, cfg: TrainConfig
) -> dict[str, Any]:
    """Score ``episodes``, estimate advantages and update the policy; its statistics (none when no
    episode can be trained on)."""
    # 2. the token batch: one right-padded row per episode that ran to an end, its score on its
    # last sampled token
    batch = TokenBatch.from_episodes(episodes, cfg.reward, cfg.reward_params)
    if batch is None:
        return {}
    # 3. advantages; a critic first scores every row (its values are the baseline)
    critic = learner.value_head is not None
    scores = learner.score(batch) if critic else None
    values = scores.old_values if scores is not None else None
    adv, returns = advantages(
        batch, estimator, values=values, invalid_action_penalty=cfg.invalid_action_penalty
    )
    # a row with no advantage adds nothing to the loss unless a KL or entropy term reads it: such
    # rows are never forwarded (``zero_adv_skipped`` is their share)
    rows = len(batch.lengths)
    inert = not critic and cfg.kl_coef == 0 and cfg.entropy_coef == 0
    keep = informative_rows(adv, batch.mask) if inert else list(range(rows))
    info = {
        "zero_adv_skipped": round(1 - len(keep) / rows, 4),
        "invalid_turns": batch.invalid_turn_rate(),
        **{f"anchor_coverage/{env}": round(c, 4) for env, c in batch.anchor_coverage().items()},
    }
    if not keep:
        return {**info, "trained_tokens": 0}
    if len(keep) < rows:
        batch = batch.select(keep)
        adv, returns = adv[keep, : batch.width], returns[keep, : batch.width]
    if scores is None:  # old log-probs (off-policy epochs) and the reference's (a KL term)
        scores = learner.score(batch)
    t = time.perf_counter()
    stats = update(learner, batch, scores, adv, returns)
    seconds = time.perf_counter() - t
    return {
        **stats,
        **info,
        "trained_tokens": int(batch.mask.sum()),
        # every token of the rows goes through the forward and backward passes, not only the
        # sampled ones
        "update_tokens_per_s": round(sum(batch.lengths) / max(seconds, 1e-9), 1),
    }


def mini_batches(k: int, rows: int) -> list[list[int]]:
    """The rows of each optimizer step in one epoch: all of them in length order when ``k`` is 1,
    else a shuffle (torch's seeded RNG) cut into ``k`` parts, each in length order."""
    if k == 1:
        return [list(range(rows))]
    order = torch.randperm(rows).tolist()
    return [sorted(order[i::k]) for i in range(min(k, rows))]


def update(
    learner: Learner, batch: TokenBatch, scores: Scores, adv: torch.Tensor, returns: torch.Tensor
) -> dict[str, float]:
    """4. ``ppo_epochs`` epochs of ``mini_batches`` optimizer steps, each over its micro-batches;
    the mean statistics per optimizer step, the last gradient norm and the learning rate."""
    cfg = learner.cfg
    sums = dict.fromkeys(STAT_KEYS, 0.0)
    grad_norm, steps = 0.0, 0
    for _ in range(cfg.ppo_epochs):
        for rows in mini_batches(cfg.mini_batches, len(batch.lengths)):
            for k, v in _mini_batch(learner, rows, batch, scores, adv, returns).items():
                sums[k] += v
            # 6. the optimizer step
            grad_norm = float(torch.nn.utils.clip_grad_norm_(learner.params, cfg.grad_clip))
            learner.optimizer.step()
            learner.optimizer.zero_grad(set_to_none=True)
            steps += 1
    learner.lr_sched.step()
    out = {k: v / steps for k, v in sums.items()}
    if learner.value_head is None:
        out.pop("value_loss")
    return {**out, "grad_norm": grad_norm, "lr": learner.optimizer.param_groups[0]["lr"]}


def _mini_batch(
    learner: Learner,
    rows: list[int],
    batch: TokenBatch,
    scores: Scores,
    adv: torch.Tensor,
    returns: torch.Tensor,
) -> dict[str, float]:
    """The forward and backward passes of one optimizer step's rows, micro-batch by micro-batch,
    a prompt that rows share run once; the summed statistics. The loss is normalised by the rows'
    own tokens or sequences."""
    norm = (float(batch.mask[rows].sum().clamp(min=1)), float(len(rows)))
    sums = dict.fromkeys(STAT_KEYS, 0.0)
    groups = prompt_groups(batch.ids, batch.mask, rows) if learner.shares_prompts() else [(0, rows)]
    for start, members in groups:
        prefix = (
            SharedPrefix(learner.model, batch.ids[members[:1], :start].to(learner.device)) if start else None
        )
        for part in micro_batches(
            [batch.lengths[i] - start for i in members], learner.cfg.micro_batch_tokens
        ):
            for k, v in _backward(
                learner, [members[i] for i in part], batch, scores, adv, returns, norm, prefix
            ).items():
                sums[k] += v
        if prefix is not None:
            prefix.backward()
    return sums


def _backward(
    learner: Learner,
    g: list[int],
    batch: TokenBatch,
    scores: Scores,
    adv: torch.Tensor,
    returns: torch.Tensor,
    norm: tuple[float, float],
    prefix: SharedPrefix | None,
) -> dict[str, float]:
    """5. The loss of the micro-batch of rows ``g`` (from the end of ``prefix``, the prompt they
    share, when given), and its backward pass; its statistics."""
    L, dev, cfg = max(batch.lengths[i] for i in g), learner.device, learner.cfg
    mask = batch.mask[g, :L].to(dev)
    start = prefix.length if prefix is not None else 0
    lp, entropy, out = learner.logprobs(batch.ids[g, start:L], mask[:, start:], entropy=True, prefix=prefix)
    if start:  # no token of the prompt is sampled: its log-probs and entropies are 0
        lp, entropy = (torch.nn.functional.pad(t, (start, 0)) for t in (lp, entropy))
    values = learner.values(out) if learner.value_head is not None else None
    tokens, seqs = norm
    agg = cfg.loss_agg
    # PPO's clipped surrogate on the ratio new / old (dual-clipped for negative advantages);
    # on-policy (one epoch, one mini-batch) the old log-probs are the new ones, detached
    old = lp.detach() if learner.on_policy() else scores.old_logprobs[g, :L].to(dev)
    loss, pg_stats = policy_loss(
        old,
        lp,
        adv[g, :L].to(dev),
        mask,
        clip_ratio=cfg.clip_ratio,
        clip_ratio_high=cfg.clip_ratio_high,
        agg=agg,
        tokens=tokens,
        seqs=seqs,
    )
    share = float(mask.sum()) / tokens  # of the mini-batch's tokens
    stats = {"pg_loss": float(loss.detach()), "clip_frac": float(pg_stats["clip_frac"]) * share}
    # KL to the frozen reference, as a loss term (not in the reward)
    if cfg.kl_coef > 0:
        ref = scores.ref_logprobs[g, :L].to(dev)
        kl = agg_loss(kl_penalty(lp, ref, cfg.kl_kind), mask, agg, tokens=tokens, seqs=seqs)
        loss = loss + cfg.kl_coef * kl
        stats["kl"] = float(kl.detach())
    # the entropy bonus (reported even when its coefficient is 0)
    mean_entropy = agg_loss(entropy, mask, agg, tokens=tokens, seqs=seqs)
    if cfg.entropy_coef:
        loss = loss - cfg.entropy_coef * mean_entropy
    stats["entropy"] = float(mean_entropy.detach())
    # the critic's clipped value loss (gae)
    if values is not None:
        old_values, target = scores.old_values[g, :L].to(dev), returns[g, :L].to(dev)
        vl = value_loss(
            values, old_values, target, mask, clip=cfg.value_clip, agg=agg, tokens=tokens, seqs=seqs
        )
        loss = loss + cfg.value_coef * vl
        stats["value_loss"] = float(vl.detach())
    loss.backward()
    return stats
