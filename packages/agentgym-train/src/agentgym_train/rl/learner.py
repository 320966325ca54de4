"""The native learner: the model being trained, its frozen reference, an optional critic head and
the optimizer, in this process (CPU or one GPU), with the forward passes the RL step reads
(:mod:`agentgym_train.rl.step` runs the update over them) and their state for checkpoints.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from agentgym_train.models.loading import TrainingModel
from agentgym_train.models.logprobs import has_plain_lm_head, micro_batches, sampled_logprobs
from agentgym_train.rl.batch import TokenBatch
from agentgym_train.rl.config import TrainConfig
from agentgym_train.rl.shared_prefix import SharedPrefix


@dataclass
class Scores:
    """What the update reads from before it changes the weights, ``B x T`` each."""

    old_logprobs: torch.Tensor
    ref_logprobs: torch.Tensor
    old_values: torch.Tensor


class Learner:
    def __init__(self, cfg: TrainConfig, model_path: str | Path, *, critic: bool, device: str):
        self.cfg, self.device = cfg, device
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
