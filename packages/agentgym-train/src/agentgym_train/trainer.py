"""The native trainer: multi-turn RL in one process (torch, CPU or one GPU, Hugging Face models).

Each step: draw tasks from the envs' train splits, roll out ``n`` samples of each with the model
being trained (horizon from the schedule), score them, estimate advantages with the configured
algorithm, and update the policy with the clipped surrogate, a KL term to a frozen reference and
an entropy bonus, over micro-batches bounded by a token budget (gradient accumulation is exact:
every micro-batch's loss is normalised by the whole batch's token or sequence count).

A run lives in ``<runs_dir>/<name>/``: ``config.yaml``, ``metrics.jsonl``,
``episodes/step_NNNNNN.jsonl``, ``checkpoints/step_NNNNNN/``, ``plots/*.png``, ``report.json`` and
``model/`` (the final weights). Checkpoints hold the model, the optimiser, every random generator,
the schedule's state and the task sampler's position, so a resumed run continues exactly as a
straight run would have.
"""

from __future__ import annotations

import copy
import json
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agentgym.errors import AgentGymError
from agentgym.plugins import get_env_spec
from agentgym.trajectory import Episode, write_episodes
from agentgym_train.algorithms import (
    Batch,
    agg_loss,
    entropy_from_logits,
    kl_penalty,
    policy_loss,
    token_rewards,
    value_loss,
)
from agentgym_train.config import TrainConfig
from agentgym_train.envs import LocalEnvs
from agentgym_train.evaluate import evaluate, split_ids
from agentgym_train.horizon import make_schedule
from agentgym_train.policies.base import Sampling
from agentgym_train.policies.hf import FAST, HFPolicy, load_tokenizer
from agentgym_train.rollout import RolloutEngine, Task
from agentgym_train.specs import get_algorithm

TIMING_KEYS = ("time_generate", "time_env", "time_train", "time_step", "tokens_per_s")


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def token_logprobs(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """``B x T`` log-probability of each token given the ones before it (0 at position 0)."""
    lp = torch.log_softmax(logits[:, :-1].float(), dim=-1).gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return torch.nn.functional.pad(lp, (1, 0))


#: Config keys a resumed run may change: how long it runs, how often it saves and validates, what
#: it prints. Any other change would continue a run under settings it was not trained with.
RESUMABLE_CHANGES = frozenset({"steps", "save_every", "val_every", "progress", "resume"})


def sampled_logprobs(
    model: Any, ids: torch.Tensor, mask: torch.Tensor, *, entropy: bool = False, hidden: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None, Any]:
    """``B x T`` log-probabilities (and entropies) of the tokens of right-padded rows, filled only
    where ``mask`` is 1 (the sampled tokens, all the losses read) and zero elsewhere; and the model
    output, with its hidden states, when ``hidden`` (a critic reads them).

    The forward takes no padding mask: under causal attention no real token sees the pads after
    it, and SDPA then runs its fused causal kernel. The vocabulary projection and softmax run on
    the sampled positions alone: a few per cent of an episode's tokens, the rest being prompt and
    observations, while over all of them the ``B x T x vocab`` logits and their gradient were much
    of a step's time. Model types outside ``FAST`` (whose logits may be more than the output
    embedding of the last hidden state) and ``hidden`` take the whole forward pass."""
    device = next(model.parameters()).device
    ids = ids.to(device)
    if hidden or getattr(model.config, "model_type", None) not in FAST:
        out = model(input_ids=ids, output_hidden_states=hidden)
        lp = token_logprobs(out.logits, ids)
        ent = torch.nn.functional.pad(entropy_from_logits(out.logits[:, :-1]), (1, 0)) if entropy else None
        return lp, ent, out
    states = model.get_decoder()(input_ids=ids).last_hidden_state
    predicts = mask[:, 1:].to(device) > 0  # position t - 1 predicts the sampled token t
    logp = torch.log_softmax(model.get_output_embeddings()(states[:, :-1][predicts]).float(), -1)
    picked = logp.gather(-1, ids[:, 1:][predicts][:, None])[:, 0]

    def spread(values: torch.Tensor) -> torch.Tensor:
        full = torch.zeros(predicts.shape, device=device).masked_scatter(predicts, values)
        return torch.nn.functional.pad(full, (1, 0))

    return spread(picked), spread(-(logp.exp() * logp).sum(-1)) if entropy else None, None


def turn_spans(loss_mask: list[int]) -> list[tuple[int, int]]:
    """``[start, end)`` of each run of sampled tokens: one per model turn, in order."""
    spans, start = [], None
    for i, m in enumerate([*loss_mask, 0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            spans.append((start, i))
            start = None
    return spans


def invalid_turn_mask(ep: Episode, width: int) -> torch.Tensor:
    """1 on the sampled tokens of each turn whose action was invalid or did not parse."""
    out = torch.zeros(width)
    # a turn is a run of sampled tokens and a step of the episode: the two lists pair up in
    # order (an episode cut short by its context has a last turn without a step)
    for (a, b), step in zip(turn_spans(ep.tokens.loss_mask), ep.steps, strict=False):
        if not step.valid_action:
            out[a:b] = 1.0
    return out


def episode_score(ep: Episode, reward: str, params: dict[str, Any] | None = None) -> float:
    """The scalar an episode is trained on: its success (0/1), its return, or the sum of a reward
    transform's per-step rewards (e.g. ``format_penalty``: the return minus a penalty per invalid
    action)."""
    if reward == "success":
        return float(ep.success)
    if reward == "return":
        return float(ep.return_)
    from agentgym.rewards import apply_reward_transform

    return float(sum(apply_reward_transform(reward, ep, **(params or {}))))


def micro_batches(lengths: list[int], budget: int) -> list[list[int]]:
    """Consecutive groups of rows whose padded size (rows x longest) stays within ``budget``
    tokens; a row longer than the budget gets a group of its own."""
    groups: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i, n in enumerate(lengths):
        if current and (len(current) + 1) * max(longest, n) > budget:
            groups.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, n)
    if current:
        groups.append(current)
    return groups


def category_ids(env: str, split: str, categories: list[str] | None, limit: int | None = None) -> list[int]:
    """Task ids of ``split`` in any of ``categories`` (all without), ascending, the first ``limit``."""
    if not categories:
        return split_ids(env, split, limit)
    known = get_env_spec(env).splits[split].categories
    ids = sorted({t for c in categories if c in known for t in known[c]})
    return ids[:limit]


class TaskSampler:
    """Train tasks drawn uniformly: an env, then a task id of its split (in the chosen categories).
    Its state is saved in checkpoints (the data position)."""

    def __init__(
        self, envs: list[str], split: str, limit: int | None, seed: int, categories: list[str] | None = None
    ):
        self.ids = {env: category_ids(env, split, categories, limit) for env in envs}
        self.envs = list(envs)
        self.rng = random.Random(seed)

    def draw(self, k: int) -> list[tuple[str, int]]:
        out = []
        for _ in range(k):
            env = self.envs[self.rng.randrange(len(self.envs))]
            ids = self.ids[env]
            out.append((env, ids[self.rng.randrange(len(ids))]))
        return out


def resolve_dtype(name: str) -> torch.dtype:
    if name == "bfloat16":
        return torch.bfloat16
    if name == "auto" and torch.cuda.is_available() and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float32


class Trainer:
    def __init__(self, cfg: TrainConfig, *, log: Callable[[str], None] | None = None):
        self.cfg = cfg
        self.log = log or (lambda message: None)
        self.run_dir = Path(cfg.runs_dir) / cfg.name
        self.algo = get_algorithm(cfg.algorithm)
        self.estimate = self.algo.estimator()
        self.algo_params = {**self.algo.params, **cfg.algo_params}
        self.schedule = make_schedule(cfg.horizon, **cfg.horizon_params)
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.step = 0
        self.val_history: list[dict[str, Any]] = []

    # -- setup --------------------------------------------------------------------------------
    def _model_dir(self) -> Path:
        if self.cfg.model:
            path = Path(self.cfg.model)
            if not (path / "config.json").is_file():
                raise AgentGymError(f"model {path}: not a Hugging Face model directory (no config.json)")
            return path
        from agentgym_train.tiny import build_tiny

        path = self.run_dir / "tiny"
        if not (path / "config.json").is_file():
            self.log(f"building the tiny model in {path}")
            build_tiny(
                path,
                envs=self.cfg.envs,
                tasks_per_env=self.cfg.tiny_tasks,
                size=self.cfg.tiny_size,
                seed=self.cfg.seed,
            )
        return path

    def setup(self) -> None:
        from transformers import AutoModelForCausalLM

        cfg = self.cfg
        if cfg.resume and self._checkpoints():
            self._check_same_run()  # before anything is loaded or written
        for sub in ("episodes", "checkpoints", "plots"):
            (self.run_dir / sub).mkdir(parents=True, exist_ok=True)
        seed_everything(cfg.seed)
        model_dir = self._model_dir()
        dtype = resolve_dtype(cfg.dtype)
        self.tokenizer = load_tokenizer(model_dir)
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).to(self.device)
        self.ref = None
        if cfg.lora:
            from peft import LoraConfig, get_peft_model

            model = get_peft_model(
                model,
                LoraConfig(
                    r=cfg.lora_r,
                    lora_alpha=cfg.lora_alpha,
                    target_modules="all-linear",
                    task_type="CAUSAL_LM",
                ),
            )
        elif cfg.kl_coef > 0:
            self.ref = copy.deepcopy(model).eval().requires_grad_(False)
        self.model = model
        self.value_head = None
        params = [p for p in model.parameters() if p.requires_grad]
        if self.algo.needs_critic:
            hidden = model.config.hidden_size if not cfg.lora else model.base_model.model.config.hidden_size
            torch.manual_seed(cfg.seed)
            self.value_head = torch.nn.Linear(hidden, 1).to(self.device)
            torch.nn.init.zeros_(self.value_head.weight)
            torch.nn.init.zeros_(self.value_head.bias)
            params += list(self.value_head.parameters())
        self.params = params
        self.optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
        warm = cfg.warmup_steps
        self.lr_sched = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: min(1.0, (s + 1) / warm) if warm else 1.0
        )
        self.policy = HFPolicy(model, tokenizer=self.tokenizer, device=self.device)
        self.sampler = TaskSampler(cfg.envs, cfg.train_split, cfg.train_limit, cfg.seed, cfg.train_categories)
        self.backends = {
            env: LocalEnvs(get_env_spec(env), max_instances=cfg.max_instances) for env in cfg.envs
        }
        for env, backend in self.backends.items():
            self.log(f"{env}: {backend.bound.explain()}")
        (self.run_dir / "config.yaml").write_text(_yaml(cfg.to_dict()))
        if cfg.resume:
            self._resume()
        # metrics logged after the step this run starts from (a run that crashed after its last
        # checkpoint, or before its first) are dropped: those steps are run again
        metrics = self.run_dir / "metrics.jsonl"
        if metrics.is_file():
            keep = [
                line for line in metrics.read_text().splitlines() if json.loads(line)["step"] <= self.step
            ]
            metrics.write_text("".join(line + "\n" for line in keep))

    # -- checkpoints --------------------------------------------------------------------------
    def _checkpoints(self) -> list[Path]:
        return sorted(p for p in (self.run_dir / "checkpoints").glob("step_*") if (p / "state.pt").is_file())

    def save_checkpoint(self) -> Path:
        path = self.run_dir / "checkpoints" / f"step_{self.step:06d}"
        path.mkdir(parents=True, exist_ok=True)
        torch.save(
            {
                "model": {k: v.detach().cpu() for k, v in self.model.state_dict().items()},
                "value_head": self.value_head.state_dict() if self.value_head is not None else None,
                "optimizer": self.optimizer.state_dict(),
                "lr_sched": self.lr_sched.state_dict(),
            },
            path / "weights.pt",
        )
        torch.save(
            {
                "step": self.step,
                "python_rng": random.getstate(),
                "numpy_rng": np.random.get_state(),
                "torch_rng": torch.get_rng_state(),
                "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
                "sampler_rng": self.sampler.rng.getstate(),
                "schedule": self.schedule.state_dict(),
                "val_history": self.val_history,
            },
            path / "state.pt",
        )
        return path

    def _check_same_run(self) -> None:
        """Resuming continues the checkpointed run, so its settings must be the ones it was trained
        with; only how long it runs and how it reports may change (RESUMABLE_CHANGES)."""
        import yaml

        path = self.run_dir / "config.yaml"
        old = yaml.safe_load(path.read_text()) if path.is_file() else None
        if not isinstance(old, dict):
            return
        new = self.cfg.to_dict()
        changed = [
            f"{k}: {old.get(k)!r} -> {new[k]!r}"
            for k in new
            if k not in RESUMABLE_CHANGES and k in old and old[k] != new[k]
        ]
        if changed:
            raise AgentGymError(
                f"run {self.run_dir} has checkpoints trained with other settings ({'; '.join(changed)}): "
                "delete it, give the run another name, or pass resume=false to start it over"
            )

    def _resume(self) -> None:
        checkpoints = self._checkpoints()
        if not checkpoints:
            return
        path = checkpoints[-1]
        weights = torch.load(path / "weights.pt", weights_only=False)
        state = torch.load(path / "state.pt", weights_only=False)
        self.model.load_state_dict(weights["model"])
        if self.value_head is not None and weights["value_head"] is not None:
            self.value_head.load_state_dict(weights["value_head"])
        self.optimizer.load_state_dict(weights["optimizer"])
        self.lr_sched.load_state_dict(weights["lr_sched"])
        self.step = int(state["step"])
        random.setstate(state["python_rng"])
        np.random.set_state(state["numpy_rng"])
        torch.set_rng_state(state["torch_rng"])
        if state["cuda_rng"] is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        self.sampler.rng.setstate(state["sampler_rng"])
        self.schedule.load_state_dict(state["schedule"])
        self.val_history = state["val_history"]
        self.log(f"resumed from {path} (step {self.step})")

    # -- one step -----------------------------------------------------------------------------
    def rollout(self, horizon: int) -> tuple[list[Episode], RolloutEngine]:
        cfg = self.cfg
        draws = self.sampler.draw(cfg.tasks_per_step)
        tasks = [
            Task(env, task_id, sample=k, split=cfg.train_split)
            for env, task_id in draws
            for k in range(cfg.n)
        ]
        engine = RolloutEngine(
            self.policy,
            self.backends,
            chat=self.policy.chat,
            sampling=Sampling(
                temperature=cfg.temperature, top_p=cfg.top_p, max_new_tokens=cfg.max_new_tokens
            ),
            max_turns=horizon,
            batch_size=cfg.rollout_batch,
            max_context=cfg.max_context,
            episode_seed=cfg.seed * 1_000_003 + self.step if cfg.episode_seeds else None,
        )
        # group ids: one per drawn task (the same task drawn twice in a step forms two groups)
        episodes = engine.run(tasks, close=False)
        for i, ep in enumerate(episodes):
            ep.group = i // cfg.n  # type: ignore[attr-defined]
        return episodes, engine

    def _sampled_logprobs(
        self, model: Any, ids: torch.Tensor, mask: torch.Tensor, entropy: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None, Any]:
        return sampled_logprobs(model, ids, mask, entropy=entropy, hidden=self.value_head is not None)

    def _mini_batches(self, rows: int) -> list[list[int]]:
        """The rows of each optimizer step in one epoch: all of them in length order when
        ``mini_batches`` is 1, else a shuffle (torch's seeded RNG) cut into that many parts,
        each in length order."""
        k = self.cfg.mini_batches
        if k == 1:
            return [list(range(rows))]
        order = torch.randperm(rows).tolist()
        return [sorted(order[i::k]) for i in range(min(k, rows))]

    def update(self, episodes: list[Episode]) -> dict[str, float]:
        cfg = self.cfg
        usable = [
            ep
            for ep in episodes
            if ep.termination != "error" and ep.tokens and ep.tokens.reward_index is not None
        ]
        # by length: micro-batches pad to their longest row (the loss does not depend on row order)
        usable.sort(key=lambda ep: len(ep.tokens.ids))
        if not usable:
            return {}
        lengths = [len(ep.tokens.ids) for ep in usable]
        B, T = len(usable), max(lengths)
        ids = torch.zeros(B, T, dtype=torch.long)
        mask = torch.zeros(B, T)
        for r, ep in enumerate(usable):
            n = lengths[r]
            ids[r, :n] = torch.tensor(ep.tokens.ids)
            mask[r, :n] = torch.tensor(ep.tokens.loss_mask, dtype=torch.float32)
        scores = torch.tensor([episode_score(ep, cfg.reward, cfg.reward_params) for ep in usable])
        index = [getattr(ep, "group", ep.task_id) for ep in usable]
        groups = micro_batches(lengths, cfg.micro_batch_tokens)

        # One epoch of one optimizer step is on-policy: the weights that score the tokens are the
        # ones that sampled them, so the old log-probs are the current ones, detached (ratio 1, as
        # verl does), and their forward pass is skipped. A critic still needs its old values.
        on_policy = cfg.ppo_epochs == 1 and cfg.mini_batches == 1
        old_lp, ref_lp, old_v = torch.zeros(B, T), torch.zeros(B, T), torch.zeros(B, T)
        self.model.eval()
        with torch.no_grad():
            for g in groups:
                L = max(lengths[i] for i in g)
                if not on_policy or self.value_head is not None:
                    lp, _, out = self._sampled_logprobs(self.model, ids[g, :L], mask[g, :L])
                    old_lp[g, :L] = lp.float().cpu()
                    if self.value_head is not None:
                        old_v[g, :L] = self.value_head(out.hidden_states[-1].float()).squeeze(-1).cpu()
                if cfg.kl_coef > 0:
                    # the reference's log-probs only: never its hidden states, even beside a critic
                    if self.ref is not None:
                        lp, _, _ = sampled_logprobs(self.ref, ids[g, :L], mask[g, :L])
                    else:  # LoRA: the base model is the reference
                        with self.model.disable_adapter():
                            lp, _, _ = sampled_logprobs(self.model, ids[g, :L], mask[g, :L])
                    ref_lp[g, :L] = lp.float().cpu()
        self.model.train()
        batch = Batch(token_rewards(scores, [ep.tokens.reward_index for ep in usable], T), mask, index, old_v)
        adv, returns = self.estimate(batch, **self.algo_params)
        if cfg.invalid_action_penalty:
            # after the estimator, so no group normalisation scales it up where all samples fail
            invalid = torch.stack([invalid_turn_mask(ep, T) for ep in usable])
            adv = adv - cfg.invalid_action_penalty * invalid
        agg = cfg.loss_agg
        sums: dict[str, float] = {
            "pg_loss": 0.0,
            "kl": 0.0,
            "entropy": 0.0,
            "clip_frac": 0.0,
            "value_loss": 0.0,
        }
        grad_norm = 0.0
        updates = 0
        for _ in range(cfg.ppo_epochs):
            for rows in self._mini_batches(B):
                # each mini-batch is one optimizer step, its loss normalised by its own tokens/rows
                sub = [lengths[i] for i in rows]
                tokens, seqs = float(mask[rows].sum().clamp(min=1)), float(len(rows))
                for part in micro_batches(sub, cfg.micro_batch_tokens):
                    g = [rows[i] for i in part]
                    L = max(lengths[i] for i in g)
                    m = mask[g, :L].to(self.device)
                    lp, ent_tokens, out = self._sampled_logprobs(self.model, ids[g, :L], m, entropy=True)
                    pg, stats = policy_loss(
                        lp.detach() if on_policy else old_lp[g, :L].to(self.device),
                        lp,
                        adv[g, :L].to(self.device),
                        m,
                        clip_ratio=cfg.clip_ratio,
                        clip_ratio_high=cfg.clip_ratio_high,
                        agg=agg,
                        tokens=tokens,
                        seqs=seqs,
                    )
                    loss = pg
                    share = float(m.sum()) / tokens
                    if cfg.kl_coef > 0:
                        kl = agg_loss(
                            kl_penalty(lp, ref_lp[g, :L].to(self.device), cfg.kl_kind),
                            m,
                            agg,
                            tokens=tokens,
                            seqs=seqs,
                        )
                        loss = loss + cfg.kl_coef * kl
                        sums["kl"] += float(kl.detach())
                    ent = agg_loss(ent_tokens, m, agg, tokens=tokens, seqs=seqs)
                    if cfg.entropy_coef:
                        loss = loss - cfg.entropy_coef * ent
                    sums["entropy"] += float(ent.detach())
                    if self.value_head is not None:
                        v = self.value_head(out.hidden_states[-1].float()).squeeze(-1)
                        vl = value_loss(
                            v,
                            old_v[g, :L].to(self.device),
                            returns[g, :L].to(self.device),
                            m,
                            clip=cfg.value_clip,
                            agg=agg,
                            tokens=tokens,
                            seqs=seqs,
                        )
                        loss = loss + cfg.value_coef * vl
                        sums["value_loss"] += float(vl.detach())
                    loss.backward()
                    sums["pg_loss"] += float(pg.detach())
                    sums["clip_frac"] += float(stats["clip_frac"]) * share
                grad_norm = float(torch.nn.utils.clip_grad_norm_(self.params, cfg.grad_clip))
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
                updates += 1
        self.lr_sched.step()
        out = {k: v / updates for k, v in sums.items()}
        out.update(
            grad_norm=grad_norm,
            lr=self.optimizer.param_groups[0]["lr"],
            trained_tokens=int(mask.sum()),
            invalid_turns=sum(not st.valid_action for ep in usable for st in ep.steps)
            / max(sum(len(ep.steps) for ep in usable), 1),
        )
        if not self.algo.needs_critic:
            out.pop("value_loss")
        return out

    def train_step(self) -> dict[str, Any]:
        self.step += 1
        horizon = self.schedule(self.step)
        t0 = time.perf_counter()
        episodes, engine = self.rollout(horizon)
        t1 = time.perf_counter()
        write_episodes(self.run_dir / "episodes" / f"step_{self.step:06d}.jsonl", episodes)
        stats = self.update(episodes)
        t2 = time.perf_counter()
        scored = [ep for ep in episodes if ep.termination != "error"]
        n = max(len(scored), 1)
        metrics: dict[str, Any] = {
            "step": self.step,
            "horizon": horizon,
            "return": sum(ep.return_ for ep in scored) / n,
            "success": sum(ep.success for ep in scored) / n,
            "turns": sum(ep.num_turns for ep in scored) / n,
            "truncation_rate": sum(ep.termination == "max_turns" for ep in scored) / n,
            "format_errors": sum(ep.termination == "format_error" for ep in scored) / n,
            "env_errors": len(episodes) - len(scored),
            **stats,
            "time_generate": round(engine.stats.generate_s, 3),
            "time_env": round(engine.stats.env_s, 3),
            "time_train": round(t2 - t1, 3),
            "time_step": round(t2 - t0, 3),
            "tokens_per_s": round(engine.stats.sampled_tokens / max(t1 - t0, 1e-9), 1),
        }
        self.schedule.update(self.step, metrics)
        with open(self.run_dir / "metrics.jsonl", "a") as f:
            f.write(json.dumps(metrics) + "\n")
        return metrics

    def validate(self, label: str) -> dict[str, Any]:
        """Evaluate the test split; the training RNG streams are left untouched (forked)."""
        cfg = self.cfg
        for backend in self.backends.values():
            backend.release_idle()  # validation makes its own, within the same bound
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(cfg.seed + 1_000_003)
            report, episodes = evaluate(
                cfg.envs,
                self.policy,
                split=cfg.val_split,
                n=cfg.val_n,
                limit=cfg.val_limit,
                batch_size=cfg.rollout_batch,
                sampling=Sampling(temperature=cfg.val_temperature, max_new_tokens=cfg.max_new_tokens),
                max_context=cfg.max_context,
                max_turns=cfg.val_max_turns,
                max_instances=cfg.max_instances,
                # below every training step's seed (seed * 1_000_003 + step): never the same streams
                episode_seed=cfg.seed * 1_000_003 - 1 - self.step if cfg.episode_seeds else None,
            )
        entry = {"step": self.step, "label": label, "envs": report["envs"]}
        entry["success"] = sum(r["success"] for r in report["envs"].values()) / len(report["envs"])
        self.val_history.append(entry)
        write_episodes(self.run_dir / "episodes" / f"val_step_{self.step:06d}.jsonl", episodes)
        return entry

    # -- the loop -----------------------------------------------------------------------------
    def train(self, on_step: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
        cfg = self.cfg
        t0 = time.perf_counter()
        if self.step == 0 and not any(v["step"] == 0 for v in self.val_history):
            self.log("validating before training")
            self.validate("before")
        while self.step < cfg.steps:
            metrics = self.train_step()
            if on_step is not None:
                on_step(metrics)
            last = self.step == cfg.steps
            if cfg.val_every and self.step % cfg.val_every == 0 and not last:
                self.validate(f"step {self.step}")
            if (cfg.save_every and self.step % cfg.save_every == 0) or last:
                self.save_checkpoint()
        if not any(v["step"] == self.step and v["label"] == "after" for v in self.val_history):
            self.validate("after")
            self.save_checkpoint()  # the validation history is part of the run's state
        self.model.save_pretrained(self.run_dir / "model")
        self.tokenizer.save_pretrained(self.run_dir / "model")
        from agentgym_train.plots import plot_run

        plots = plot_run(self.run_dir, self.val_history)
        report = {
            "run": str(self.run_dir),
            "steps": self.step,
            "algorithm": cfg.algorithm,
            "horizon": cfg.horizon,
            "validation": self.val_history,
            "before": self.val_history[0]["success"] if self.val_history else None,
            "after": self.val_history[-1]["success"] if self.val_history else None,
            "wall_s": round(time.perf_counter() - t0, 1),
            "model": str(self.run_dir / "model"),
            "plots": [str(p) for p in plots],
        }
        (self.run_dir / "report.json").write_text(json.dumps(report, indent=2))
        return report

    def close(self) -> None:
        import asyncio

        async def shut() -> None:
            await asyncio.gather(*(b.aclose() for b in self.backends.values()))

        asyncio.run(shut())


def _yaml(data: dict[str, Any]) -> str:
    import yaml

    return yaml.safe_dump(data, sort_keys=False)
