"""Supervised fine-tuning on episodes (loss on assistant tokens only), and DPO on episode pairs.

Data: episode JSON Lines (``agentgym collect``, rollouts, a run's ``episodes/``) or files in the
AgentGym conversation format (``[{"item_id", "conversations": [{"from", "value", "loss"}]}]``,
a JSON list or JSON Lines). Every conversation is tokenised the way a rollout builds its
sequence (:meth:`ChatFormat.conversation`): each assistant message plus its end-of-turn token is
trained on, everything else is context.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

import torch

from agentgym.errors import AgentGymError
from agentgym.trajectory import Episode, read_episodes
from agentgym_train.models.chat import ChatFormat
from agentgym_train.models.device import resolve_autocast, seed_everything
from agentgym_train.models.loading import TrainingModel, load_tokenizer
from agentgym_train.models.logprobs import micro_batches, pad_rows, sampled_logprobs
from agentgym_train.models.memory import frees_to_system, peak_memory


def read_data(paths: Iterable[str | Path]) -> list[Episode]:
    """Episodes from JSONL episode files or AgentGym-format files (either layout, detected)."""
    out: list[Episode] = []
    for path in map(Path, paths):
        if not path.is_file():
            raise AgentGymError(f"data file not found: {path}")
        text = path.read_text()
        head = text.lstrip()[:1]
        if head == "[":
            items = json.loads(text)
        else:
            first = json.loads(text.splitlines()[0]) if text.strip() else {}
            if "conversations" not in first:
                out += list(read_episodes(path))
                continue
            items = [json.loads(line) for line in text.splitlines() if line.strip()]
        out += [Episode.from_agentgym(item) for item in items]
    return out


def _messages(ep: Episode) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in ep.messages]


def encode(
    episodes: Sequence[Episode], chat: ChatFormat, max_len: int | None = None
) -> list[tuple[list[int], list[int]]]:
    """``(ids, loss_mask)`` per episode with at least one assistant message, cut at ``max_len``."""
    rows = []
    for ep in episodes:
        msgs = _messages(ep)
        if not any(m["role"] == "assistant" for m in msgs):
            continue
        trace = chat.conversation(msgs)
        ids, mask = trace.ids, trace.loss_mask
        if max_len is not None:
            ids, mask = ids[:max_len], mask[:max_len]
        if any(mask):
            rows.append((ids, mask))
    return rows


def load_for_training(loading: TrainingModel | None, path: str | Path) -> tuple[Any, Any, ChatFormat]:
    """The model ``loading`` prepares (default: :class:`TrainingModel`'s defaults; on the default
    device, in training mode), its tokenizer and chat format."""
    tokenizer = load_tokenizer(path)
    return (loading or TrainingModel()).load(path), tokenizer, ChatFormat(tokenizer)


def sft(
    model_path: str | Path,
    episodes: Sequence[Episode],
    output: str | Path,
    *,
    epochs: int = 3,
    lr: float = 1e-3,
    batch_size: int = 16,
    micro_batch_tokens: int = 2048,
    max_len: int | None = 2048,
    warmup: float = 0.05,
    seed: int = 0,
    autocast: bool | Literal["auto"] = False,
    loading: TrainingModel | None = None,
    on_step: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Fine-tune ``model_path`` on ``episodes``, saved to ``output`` (LoRA merged). Loss: token-mean
    cross-entropy over a batch's assistant tokens; warm-up then cosine. ``autocast``: bfloat16
    products over float32 weights, gradients and optimizer (mixed precision; pays where the device
    computes in bfloat16 natively, where ``auto`` turns it on). Returns a summary: epoch losses, time, peak memory."""
    if not episodes:
        raise AgentGymError("no episodes to train on")
    Path(output).mkdir(parents=True, exist_ok=True)  # an unusable output fails before training
    seed_everything(seed)
    model, tokenizer, chat = load_for_training(loading, model_path)
    autocast = resolve_autocast(autocast, next(model.parameters()).device.type)
    rows = _rows(episodes, chat, max_len)
    total = (len(rows) + batch_size - 1) // batch_size * epochs
    opt, sched = _optimizer(model, lr, total, warmup)
    rng, order = random.Random(seed), list(range(len(rows)))
    history: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    with frees_to_system():
        for epoch in range(epochs):
            rng.shuffle(order)
            epoch_loss, epoch_tokens = 0.0, 0.0
            for b in range(0, len(order), batch_size):
                # by length: micro-batches pad to their longest row, so neighbours of similar length waste least
                batch = sorted((rows[i] for i in order[b : b + batch_size]), key=lambda r: len(r[0]))
                loss, tokens = _sft_backward(model, batch, micro_batch_tokens, chat.eot_id, autocast)
                optimizer_step(model, opt, sched)
                epoch_loss, epoch_tokens = epoch_loss + loss * tokens, epoch_tokens + tokens
                history.append(
                    dict(step=len(history) + 1, epoch=epoch + 1, loss=loss, lr=sched.get_last_lr()[0])
                )
                if on_step is not None:
                    on_step({**history[-1], "total": total})
            history[-1]["epoch_loss"] = epoch_loss / max(epoch_tokens, 1)
    summary = {
        "model": str(Path(output)),
        "examples": len(rows),
        "trained_tokens_per_epoch": int(sum(sum(m) for _, m in rows)),
        "epochs": epochs,
        "steps": len(history),
        "autocast": "bfloat16" if autocast else None,
        **_epoch_losses(history),
        **_speed(rows, epochs, time.perf_counter() - t0),
    }
    return save_trained(model, tokenizer, output, "sft", history, summary)


def _rows(episodes: Sequence[Episode], chat: ChatFormat, max_len: int | None) -> list[Any]:
    """The episodes encoded for SFT; an error that says why when none has a reply to train on."""
    rows = encode(episodes, chat, max_len)
    if not rows:
        cut = f" within max_len={max_len} tokens (a long first observation, as WebArena's pages?)"
        raise AgentGymError(f"no episode has an assistant message to train on{cut if max_len else ''}")
    return rows


def _speed(rows: Sequence[tuple[list[int], list[int]]], epochs: int, seconds: float) -> dict[str, Any]:
    """Time, tokens (trained and context) per second, and peak memory, for a summary."""
    tokens = sum(len(ids) for ids, _ in rows) * epochs
    return {
        "wall_s": round(seconds, 1),
        "tokens_per_s": round(tokens / max(seconds, 1e-9), 1),
        **peak_memory(),
    }


def _epoch_losses(history: list[dict[str, Any]]) -> dict[str, float]:
    losses = [r["epoch_loss"] for r in history if "epoch_loss" in r]
    return {
        "first_epoch_loss": round(losses[0], 4),
        "last_epoch_loss": round(losses[-1], 4),
        "first_step_loss": round(history[0]["loss"], 4),
        "last_step_loss": round(history[-1]["loss"], 4),
    }


def loss_line(summary: dict[str, Any]) -> str:
    """An SFT summary's loss in words, saying what is compared: the first and the last step's batch
    loss, and the mean over each epoch (one epoch's mean alone, when there was one)."""
    n, first, last = summary["epochs"], summary["first_epoch_loss"], summary["last_epoch_loss"]
    steps = f"batch loss {summary['first_step_loss']} (step 1) -> {summary['last_step_loss']} (step {summary['steps']})"
    means = f"epoch mean {first}" if n == 1 else f"epoch mean {first} (epoch 1) -> {last} (epoch {n})"
    return f"{steps}; {means}; {summary['wall_s']} s"


def _optimizer(model: Any, lr: float, total: int, warmup: float) -> tuple[torch.optim.Optimizer, Any]:
    """AdamW and its schedule: linear warm-up over ``warmup`` of ``total`` steps, then cosine."""
    opt = adamw(model, lr)
    return opt, torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(total, max(1, int(total * warmup))))


def adamw(model: Any, lr: float) -> torch.optim.Optimizer:
    """AdamW over the trainable weights, one tensor at a time: the multi-tensor (``foreach``)
    step builds temporaries the size of every weight at once, the peak of a CPU fine-tune."""
    return torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, foreach=False)


def optimizer_step(model: Any, opt: torch.optim.Optimizer, sched: Any = None) -> None:
    """Clip the gradient norm to 1, step the optimizer (and the lr schedule), clear the gradient."""
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    if sched is not None:
        sched.step()
    opt.zero_grad(set_to_none=True)


def warmup_cosine(total: int, warm: int) -> Callable[[int], float]:
    """The lr factor at each step: linear warm-up over ``warm`` steps, then cosine decay to 0."""

    def factor(s: int) -> float:
        if s < warm:
            return (s + 1) / warm
        return 0.5 * (1 + math.cos(math.pi * (s - warm) / max(1, total - warm)))

    return factor


def _sft_backward(
    model: Any, batch: Sequence[tuple[list[int], list[int]]], budget: int, pad_id: int, autocast: bool = False
) -> tuple[float, float]:
    """Accumulate the gradient of one batch's token-mean loss over its micro-batches; returns the
    loss and the batch's trained tokens."""
    tokens = float(sum(sum(m) for _, m in batch))
    loss_sum = 0.0
    device = next(model.parameters()).device.type
    for g in micro_batches([len(i) for i, _ in batch], budget):
        ids, mask = pad_rows([batch[i][0] for i in g], pad_id, masks=[batch[i][1] for i in g])
        # backward replays the forward's casts: only the forward needs the context
        with torch.autocast(device, dtype=torch.bfloat16, enabled=autocast):
            lp, _, _ = sampled_logprobs(model, ids, mask)
        loss = -(lp * mask.to(lp.device)).sum() / tokens
        loss.backward()
        loss_sum += float(loss.detach())
    return loss_sum, tokens


def save_trained(
    model: Any,
    tokenizer: Any,
    output: str | Path,
    kind: str,
    history: list[dict[str, Any]],
    summary: dict[str, Any],
) -> dict[str, Any]:
    """Write the model, its tokenizer, ``<kind>_metrics.jsonl`` (a line per step) and
    ``<kind>_summary.json`` to ``output``; returns the summary."""
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    if hasattr(model, "merge_and_unload"):  # LoRA: a plain model directory, usable by every command
        model = model.merge_and_unload()
    model.config.use_cache = True  # off while gradient checkpointing trained it
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    with open(out / f"{kind}_metrics.jsonl", "w") as f:
        for record in history:
            f.write(json.dumps(record) + "\n")
    (out / f"{kind}_summary.json").write_text(json.dumps(summary, indent=2))
    return summary


# -- DPO -----------------------------------------------------------------------------------------


def preference_pairs(episodes: Sequence[Episode], seed: int = 0) -> list[tuple[Episode, Episode]]:
    """(chosen, rejected) pairs: a successful and a failed episode of the same task. Each failure
    is paired once, with the successes of its task taken in turn."""
    by_task: dict[tuple[str, int], dict[bool, list[Episode]]] = defaultdict(lambda: {True: [], False: []})
    for ep in episodes:
        if ep.termination == "error":
            continue
        by_task[(ep.env, ep.task_id)][bool(ep.success)].append(ep)
    pairs = []
    for key in sorted(by_task):
        good, bad = by_task[key][True], by_task[key][False]
        for i, ep in enumerate(bad):
            if good:
                pairs.append((good[i % len(good)], ep))
    random.Random(seed).shuffle(pairs)
    return pairs


def _sequence_logprob(model: Any, rows: Sequence[tuple[list[int], list[int]]], pad_id: int) -> torch.Tensor:
    ids, mask = pad_rows([i for i, _ in rows], pad_id, masks=[m for _, m in rows])
    lp = sampled_logprobs(model, ids, mask)[0]
    return (lp * mask.to(lp.device)).sum(-1)


def dpo(
    model_path: str | Path,
    pairs: Sequence[tuple[Episode, Episode]],
    output: str | Path,
    *,
    beta: float = 0.1,
    epochs: int = 1,
    lr: float = 1e-5,
    batch_size: int = 8,
    max_len: int | None = 2048,
    seed: int = 0,
    loading: TrainingModel | None = None,
    on_step: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Direct preference optimisation against a frozen copy of the starting model:
    ``-log sigmoid(beta * ((pi_c - ref_c) - (pi_r - ref_r)))`` with sequence log-probabilities
    summed over assistant tokens. Saves to ``output``; returns loss and reward accuracy."""
    import copy

    if not pairs:
        raise AgentGymError("no preference pairs: DPO needs a success and a failure of the same task")
    Path(output).mkdir(parents=True, exist_ok=True)  # an unusable output fails before training
    seed_everything(seed)
    model, tokenizer, chat = load_for_training(loading, model_path)
    # the reference: under LoRA the base model itself (adapters off), else a frozen copy
    ref = None if loading and loading.lora_r else copy.deepcopy(model).eval().requires_grad_(False)
    encoded = [(encode([c], chat, max_len), encode([r], chat, max_len)) for c, r in pairs]
    encoded = [(c[0], r[0]) for c, r in encoded if c and r]
    opt = adamw(model, lr)
    rng = random.Random(seed)
    history: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    with frees_to_system():
        for epoch in range(epochs):
            rng.shuffle(encoded)
            for b in range(0, len(encoded), batch_size):
                record = _dpo_backward(model, ref, encoded[b : b + batch_size], beta, chat.eot_id)
                optimizer_step(model, opt)
                history.append({"step": len(history) + 1, "epoch": epoch + 1, **record})
                if on_step is not None:
                    on_step(history[-1])
    summary = {
        "model": str(Path(output)),
        "pairs": len(encoded),
        "steps": len(history),
        "first_loss": round(history[0]["loss"], 4),
        "last_loss": round(history[-1]["loss"], 4),
        "wall_s": round(time.perf_counter() - t0, 1),
        **peak_memory(),
    }
    return save_trained(model, tokenizer, output, "dpo", history, summary)


def _dpo_backward(
    model: Any, ref: Any, batch: Sequence[tuple[Any, Any]], beta: float, pad_id: int
) -> dict[str, float]:
    """The gradient of one batch of (chosen, rejected) pairs' DPO loss; its statistics."""
    chosen, rejected = [c for c, _ in batch], [r for _, r in batch]
    with torch.no_grad(), model.disable_adapter() if ref is None else contextlib.nullcontext():
        ref_c = _sequence_logprob(model if ref is None else ref, chosen, pad_id)
        ref_r = _sequence_logprob(model if ref is None else ref, rejected, pad_id)
    pi_c = _sequence_logprob(model, chosen, pad_id)
    pi_r = _sequence_logprob(model, rejected, pad_id)
    margin = beta * ((pi_c - ref_c) - (pi_r - ref_r))
    loss = -torch.nn.functional.logsigmoid(margin).mean()
    loss.backward()
    return {
        "loss": float(loss.detach()),
        "reward_accuracy": float((margin > 0).float().mean()),
        "margin": float(margin.mean().detach()),
    }
