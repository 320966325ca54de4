"""The native learner: the model being trained, its frozen reference, an optional critic head and
the optimizer, in this process (CPU or one GPU), and the policy update over micro-batches.

Gradient accumulation is exact: every micro-batch's loss is normalised by its whole mini-batch's
token or sequence count (:class:`agentgym_train.rl.update.MicroBatch`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from agentgym_train.models.modeling import TrainingModel, has_plain_lm_head, micro_batches, sampled_logprobs
from agentgym_train.rl.config import TrainConfig
from agentgym_train.rl.shared_prefix import SharedPrefix, prompt_groups
from agentgym_train.rl.update import LossSettings, MicroBatch, TokenBatch, micro_batch_loss

STAT_KEYS = ("pg_loss", "kl", "entropy", "clip_frac", "value_loss")


@dataclass
class Scores:
    """What the update reads from before it changes the weights, ``B x T`` each."""

    old_logprobs: torch.Tensor
    ref_logprobs: torch.Tensor
    old_values: torch.Tensor


class Learner:
    def __init__(self, cfg: TrainConfig, model_path: str | Path, *, critic: bool, device: str):
        self.cfg, self.device = cfg, device
        self.settings = LossSettings.from_config(cfg)
        loading = TrainingModel(
            dtype=cfg.dtype,
            lora_r=cfg.lora_r if cfg.lora else 0,
            lora_alpha=cfg.lora_alpha,
            gradient_checkpointing=cfg.gradient_checkpointing,
        )
        self.model = model = loading.load(model_path, device)
        # the reference: under LoRA the base model itself (adapters off), else a frozen copy
        self.ref = (
            copy.deepcopy(model).eval().requires_grad_(False) if cfg.kl_coef > 0 and not cfg.lora else None
        )
        self.forward_rows = 0  # rows through any forward pass, for the count of work skipped
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.value_head = self._critic(model) if critic else None
        if self.value_head is not None:
            self.params += list(self.value_head.parameters())
        self.optimizer = torch.optim.AdamW(self.params, lr=cfg.lr, weight_decay=cfg.weight_decay)
        warm = cfg.warmup_steps
        self.lr_sched = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: min(1.0, (s + 1) / warm) if warm else 1.0
        )

    def _critic(self, model: Any) -> torch.nn.Linear:
        """A value head on the last hidden state, zero at the start."""
        config = model.config if not self.cfg.lora else model.base_model.model.config
        torch.manual_seed(self.cfg.seed)
        head = torch.nn.Linear(config.hidden_size, 1).to(self.device)
        torch.nn.init.zeros_(head.weight)
        torch.nn.init.zeros_(head.bias)
        return head

    # -- state (checkpoints) --------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "model": {k: v.detach().cpu() for k, v in self.model.state_dict().items()},
            "value_head": self.value_head.state_dict() if self.value_head is not None else None,
            "optimizer": self.optimizer.state_dict(),
            "lr_sched": self.lr_sched.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        if self.value_head is not None and state["value_head"] is not None:
            self.value_head.load_state_dict(state["value_head"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.lr_sched.load_state_dict(state["lr_sched"])

    # -- forward passes -------------------------------------------------------------------------
    def logprobs(
        self,
        ids: torch.Tensor,
        mask: torch.Tensor,
        *,
        entropy: bool = False,
        prefix: SharedPrefix | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None, Any]:
        """The trained model's sampled-token log-probabilities (its hidden states too when a
        critic reads them); with ``prefix``, of rows that continue that prompt."""
        self.forward_rows += ids.shape[0]
        hidden = self.value_head is not None
        return sampled_logprobs(self.model, ids, mask, entropy=entropy, hidden=hidden, prefix=prefix)

    def shares_prompts(self) -> bool:
        """Whether the update runs a prompt that rows share once (``share_prompts``): not beside a
        critic (it reads every position's hidden state), nor under gradient checkpointing (a
        checkpointed layer takes no KV cache), nor for a model whose logits are more than an
        output layer over the decoder."""
        cfg = self.cfg
        return (
            cfg.share_prompts
            and self.value_head is None
            and not cfg.gradient_checkpointing
            and has_plain_lm_head(self.model)
        )

    def values(self, out: Any) -> torch.Tensor:
        return self.value_head(out.hidden_states[-1].float()).squeeze(-1)

    def on_policy(self) -> bool:
        """One epoch of one optimizer step: the weights that score the tokens are the ones that
        sampled them, so the old log-probs are the current ones, detached (ratio 1, as verl does)."""
        return self.cfg.ppo_epochs == 1 and self.cfg.mini_batches == 1

    @torch.no_grad()
    def score(self, batch: TokenBatch) -> Scores:
        """Old log-probs (skipped on-policy, unless a critic needs its old values), old values, and
        the reference's log-probs, micro-batch by micro-batch."""
        B, T = batch.ids.shape
        s = Scores(torch.zeros(B, T), torch.zeros(B, T), torch.zeros(B, T))
        self.model.eval()
        for g in micro_batches(batch.lengths, self.cfg.micro_batch_tokens):
            L = max(batch.lengths[i] for i in g)
            ids, mask = batch.ids[g, :L], batch.mask[g, :L]
            if not self.on_policy() or self.value_head is not None:
                lp, _, out = self.logprobs(ids, mask)
                s.old_logprobs[g, :L] = lp.float().cpu()
                if self.value_head is not None:
                    s.old_values[g, :L] = self.values(out).cpu()
            if self.cfg.kl_coef > 0:
                s.ref_logprobs[g, :L] = self._reference_logprobs(ids, mask).float().cpu()
        self.model.train()
        return s

    def _reference_logprobs(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The reference's log-probs only: never its hidden states, even beside a critic."""
        self.forward_rows += ids.shape[0]
        if self.ref is not None:
            return sampled_logprobs(self.ref, ids, mask)[0]
        with self.model.disable_adapter():  # LoRA: the base model is the reference
            return sampled_logprobs(self.model, ids, mask)[0]

    # -- the update -----------------------------------------------------------------------------
    def mini_batches(self, rows: int) -> list[list[int]]:
        """The rows of each optimizer step in one epoch: all of them in length order when
        ``mini_batches`` is 1, else a shuffle (torch's seeded RNG) cut into that many parts,
        each in length order."""
        k = self.cfg.mini_batches
        if k == 1:
            return [list(range(rows))]
        order = torch.randperm(rows).tolist()
        return [sorted(order[i::k]) for i in range(min(k, rows))]

    def update(
        self, batch: TokenBatch, scores: Scores, adv: torch.Tensor, returns: torch.Tensor
    ) -> dict[str, float]:
        """``ppo_epochs`` epochs of ``mini_batches`` optimizer steps, each over its micro-batches;
        returns the mean statistics per optimizer step, the last gradient norm and the lr."""
        sums = dict.fromkeys(STAT_KEYS, 0.0)
        grad_norm, updates = 0.0, 0
        for _ in range(self.cfg.ppo_epochs):
            for rows in self.mini_batches(len(batch.lengths)):
                for k, v in self._mini_batch(rows, batch, scores, adv, returns).items():
                    sums[k] += v
                grad_norm = float(torch.nn.utils.clip_grad_norm_(self.params, self.cfg.grad_clip))
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
                updates += 1
        self.lr_sched.step()
        out = {k: v / updates for k, v in sums.items()}
        if self.value_head is None:
            out.pop("value_loss")
        return {**out, "grad_norm": grad_norm, "lr": self.optimizer.param_groups[0]["lr"]}

    def _mini_batch(
        self, rows: list[int], batch: TokenBatch, scores: Scores, adv: torch.Tensor, returns: torch.Tensor
    ) -> dict[str, float]:
        """The forward and backward passes of one optimizer step's rows, micro-batch by
        micro-batch, a prompt that rows share run once; the summed statistics. The loss is
        normalised by the rows' own tokens or sequences."""
        tokens, seqs = float(batch.mask[rows].sum().clamp(min=1)), float(len(rows))
        sums = dict.fromkeys(STAT_KEYS, 0.0)
        groups = prompt_groups(batch.ids, batch.mask, rows) if self.shares_prompts() else [(0, rows)]
        for start, members in groups:
            prefix = (
                SharedPrefix(self.model, batch.ids[members[:1], :start].to(self.device)) if start else None
            )
            for part in micro_batches(
                [batch.lengths[i] - start for i in members], self.cfg.micro_batch_tokens
            ):
                stats = self._backward(
                    [members[i] for i in part], batch, scores, adv, returns, tokens, seqs, prefix
                )
                for k, v in stats.items():
                    sums[k] += v
            if prefix is not None:
                prefix.backward()
        return sums

    def _backward(
        self,
        g: list[int],
        batch: TokenBatch,
        scores: Scores,
        adv: torch.Tensor,
        returns: torch.Tensor,
        tokens: float,
        seqs: float,
        prefix: SharedPrefix | None = None,
    ) -> dict[str, float]:
        """The forward and backward pass of the micro-batch of rows ``g`` (from the end of
        ``prefix``, the prompt they share, when given); its statistics."""
        L, dev = max(batch.lengths[i] for i in g), self.device
        mask = batch.mask[g, :L].to(dev)
        start = prefix.length if prefix is not None else 0
        lp, entropy, out = self.logprobs(batch.ids[g, start:L], mask[:, start:], entropy=True, prefix=prefix)
        if start:  # no token of the prompt is sampled: its log-probs and entropies are 0
            lp, entropy = (torch.nn.functional.pad(t, (start, 0)) for t in (lp, entropy))
        critic = self.value_head is not None
        loss, stats = micro_batch_loss(
            self.settings,
            MicroBatch(
                logprobs=lp,
                old_logprobs=lp.detach() if self.on_policy() else scores.old_logprobs[g, :L].to(dev),
                entropy=entropy,
                advantages=adv[g, :L].to(dev),
                mask=mask,
                tokens=tokens,
                seqs=seqs,
                ref_logprobs=scores.ref_logprobs[g, :L].to(dev) if self.cfg.kl_coef > 0 else None,
                values=self.values(out) if critic else None,
                old_values=scores.old_values[g, :L].to(dev) if critic else None,
                returns=returns[g, :L].to(dev) if critic else None,
            ),
        )
        loss.backward()
        return stats
