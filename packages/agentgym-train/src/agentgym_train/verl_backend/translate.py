"""From our :class:`~agentgym_train.rl.config.TrainConfig` to verl's PPO trainer config.

Every TrainConfig key a verl run can honour maps to its verl key here (the table in the train
README follows this function); the config's ``verl:`` section is merged last, as verl overrides
(nested keys, verl's own names), so anything verl offers stays reachable. Our settings for the
agent loop, the keeper and the hooks travel inside the same config, under ``agentgym:``.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

from agentgym.errors import AgentGymError
from agentgym_train.rl.config import ConfigError, TrainConfig
from agentgym_train.rl.specs import get_algorithm

#: Our algorithms and the verl estimators they are (a plugin algorithm is bridged: ``agentgym_<name>``).
ESTIMATORS = {
    "gae": "gae",
    "grpo": "grpo",
    "rloo": "rloo",
    "reinforce_pp": "reinforce_plus_plus",
    "reinforce_pp_baseline": "reinforce_plus_plus_baseline",
}
HOOKS = "agentgym_train.verl_backend.hooks"


def _installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def default_rollout(device: str) -> str:
    """verl's rollout server when the config names none: vLLM on GPUs where it is installed, else
    ours (``agentgym_hf``, transformers)."""
    return "vllm" if device != "cpu" and _installed("vllm") else "agentgym_hf"


def estimator_name(algorithm: str) -> str:
    return ESTIMATORS.get(algorithm) or f"agentgym_{algorithm}"


def deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _refuse_native_only(cfg: TrainConfig) -> None:
    algo = get_algorithm(cfg.algorithm)
    if algo.needs_critic and cfg.algorithm != "gae":
        raise ConfigError(f"algorithm {cfg.algorithm!r} needs a critic: on verl only 'gae' trains one")
    if cfg.invalid_action_penalty:
        raise ConfigError("invalid_action_penalty (turn-level credit) is native-backend only for now")
    if cfg.dynamic_sampling:
        raise ConfigError(
            "dynamic_sampling is native-backend only: verl's trainer draws a fixed batch of tasks per step"
        )
    if cfg.task_sampler != "uniform":
        raise ConfigError(
            f"task_sampler={cfg.task_sampler} is native-backend only: verl's trainer reads its tasks from a fixed data file"
        )
    if cfg.curve_every:
        raise ConfigError(
            "curve_every (the greedy learning curve) is native-backend only: verl validates on its test_freq"
        )
    if cfg.rollout_kv_cache_gb is not None:
        raise ConfigError(
            "rollout_kv_cache_gb is native-backend only: size verl's rollout with its own "
            "actor_rollout_ref.rollout.gpu_memory_utilization"
        )
    if cfg.share_prompts:
        raise ConfigError("share_prompts is native-backend only: verl's actor runs every row whole")
    if cfg.constrain_actions:
        raise ConfigError(
            "constrain_actions (constrained decoding) is native-backend only: verl's rollout servers decode freely"
        )
    if cfg.rollout != "hf":
        raise ConfigError(
            f"rollout={cfg.rollout} is native-backend only: verl chooses its rollout server through its own "
            "keys (verl: {actor_rollout_ref: {rollout: {name: vllm}}})"
        )
    if cfg.lora:
        raise ConfigError(
            "lora: set it through verl's own keys (verl: {actor_rollout_ref: {model: {lora_rank: ...}}})"
        )
    if cfg.tasks_per_step % cfg.mini_batches:
        raise ConfigError(
            f"tasks_per_step ({cfg.tasks_per_step}) must be a multiple of mini_batches ({cfg.mini_batches}) on verl"
        )


def agentgym_settings(cfg: TrainConfig, run_dir: Path) -> dict[str, Any]:
    """What our agent loop, keeper and hooks read (``config.agentgym`` in verl's config)."""
    return {
        "name": cfg.name,
        "run_dir": str(run_dir),
        "checkpoint_dir": "${trainer.default_local_dir}",  # where verl writes them, overrides included
        "resume": cfg.resume,
        "envs": list(cfg.envs),
        "horizon": cfg.horizon,
        "horizon_params": dict(cfg.horizon_params),
        "val_max_turns": cfg.val_max_turns,
        "max_new_tokens": cfg.max_new_tokens,
        "episode_seed": cfg.episode_seed(0),  # + the step, as natively (None: episode_seeds off)
        "reward": cfg.reward,
        "reward_params": dict(cfg.reward_params),
        "algo_params": dict(cfg.algo_params),
        "max_instances": cfg.max_instances,
        "env_urls": list(cfg.env_urls),
        "env_token_file": cfg.env_token_file,
        "match_actions": cfg.match_actions,
        "format_hint": cfg.format_hint,
    }


def lengths(cfg: TrainConfig) -> tuple[int, int]:
    """verl pads prompts and responses to fixed widths: the opening prompt (system prompt and
    first observation) gets half the context, at most 4,096 tokens, the turns after it the rest.
    ``verl: {data: {max_prompt_length: N}}`` sets it; an episode whose opening prompt is longer is
    dropped with that advice."""
    context = cfg.max_context or 8192
    prompt = min(4096, context // 2)
    return prompt, context - prompt


def _model(model_path: str, cpu: bool) -> dict[str, Any]:
    # verl loads models with flash_attention_2 and packs sequences (remove padding), which keeps
    # them apart on the flash-attention path only: without flash-attn, sdpa and padding, where every
    # row is as wide as the longest. Checkpointing on CPU too: at four 2,048-token rows SmolLM2's
    # activations for backward alone are ~15 GB (7.5 GB peak with it); eager attention would add
    # every layer's attention weights on top (over 24 GB, where torch's sdpa kernels keep none)
    flash = not cpu and _installed("flash_attn")
    out: dict[str, Any] = {
        "path": model_path,
        "use_remove_padding": flash,
        "enable_gradient_checkpointing": True,
    }
    if not flash:
        out["override_config"] = {"attn_implementation": "sdpa"}
    return out


def _fsdp(cfg: TrainConfig, cpu: bool) -> dict[str, Any]:
    # fp32 master weights always (verl's default); verl's FSDP engine computes in bf16 unless its
    # mixed precision says otherwise: fp32 on CPU and when float32 is asked
    out: dict[str, Any] = {"strategy": "fsdp2"}
    if cpu or cfg.dtype == "float32":
        out["mixed_precision"] = {"param_dtype": "fp32", "reduce_dtype": "fp32", "buffer_dtype": "fp32"}
    if cpu:
        out["use_torch_compile"] = False
    return out


def _actor(cfg: TrainConfig, cpu: bool) -> dict[str, Any]:
    return {
        "strategy": "fsdp2",
        "fsdp_config": _fsdp(cfg, cpu),
        "optim": {
            "lr": cfg.lr,
            "weight_decay": cfg.weight_decay,
            "lr_warmup_steps": cfg.warmup_steps or -1,
            "clip_grad": cfg.grad_clip,  # what verl's engines clip with
        },
        "ppo_epochs": cfg.ppo_epochs,
        "ppo_mini_batch_size": cfg.tasks_per_step // cfg.mini_batches,
        "use_dynamic_bsz": True,
        "ppo_max_token_len_per_gpu": cfg.micro_batch_tokens,
        "clip_ratio": cfg.clip_ratio,
        "clip_ratio_low": cfg.clip_ratio,
        "clip_ratio_high": cfg.clip_ratio_high if cfg.clip_ratio_high is not None else cfg.clip_ratio,
        "use_kl_loss": cfg.kl_coef > 0,
        "kl_loss_coef": cfg.kl_coef,
        "kl_loss_type": cfg.kl_kind,
        "entropy_coeff": cfg.entropy_coef,
        "calculate_entropy": cfg.entropy_coef > 0,
        "loss_agg_mode": cfg.loss_agg,
        "use_torch_compile": not cpu,
    }


def _rollout(cfg: TrainConfig, run_dir: Path, device: str) -> dict[str, Any]:
    cpu = device == "cpu"
    return {
        "name": default_rollout(device),
        "mode": "async",
        "n": cfg.n,
        "temperature": cfg.temperature,
        "top_p": cfg.top_p,
        "dtype": "float32" if cpu or cfg.dtype == "float32" else "bfloat16",
        "tensor_model_parallel_size": 1,
        "calculate_log_probs": True,
        "log_prob_use_dynamic_bsz": True,
        "agent": {
            "default_agent_loop": "agentgym",
            "agent_loop_config_path": str(run_dir / "verl" / "agent_loops.yaml"),
            **({"num_workers": 1} if cpu else {}),
        },
        "val_kwargs": {
            "n": cfg.val_n,
            "temperature": cfg.val_temperature,
            "do_sample": cfg.val_temperature > 0,
            "top_p": cfg.top_p,
        },
        "seed": cfg.seed,
    }


def _trainer(cfg: TrainConfig, run_dir: Path, cpu: bool) -> dict[str, Any]:
    return {
        "project_name": "agentgym",
        "experiment_name": cfg.name,
        "total_training_steps": cfg.steps,
        "total_epochs": 1_000_000,  # steps decide; verl stops at whichever comes first
        "save_freq": cfg.save_every or cfg.steps,
        "test_freq": cfg.val_every or cfg.steps,  # 0: before the first step and after the last
        "val_before_train": cfg.val_before,
        "default_local_dir": str(run_dir / "checkpoints"),
        "resume_mode": "auto" if cfg.resume else "disable",
        # file: <run>/verl_metrics.jsonl (see launch.py); our logger's trackers are verl's names
        "logger": ["console", "file", *(n for n in dict.fromkeys(cfg.logger) if n != "console")],
        "device": "cpu" if cpu else "cuda",
        "nnodes": 1,
        "n_gpus_per_node": 1,
        "checkpoint_callback_class": f"{HOOKS}.AgentGymCheckpoint",
        "v1": {
            "trainer_mode": "sync",
            "sampler": {
                "custom_sampler": {"path": f"pkg://{HOOKS}", "name": "AgentGymSampler"},
                "sampler_kwargs": "${agentgym}",
            },
        },
    }


def _critic(cfg: TrainConfig, model_path: str, cpu: bool) -> dict[str, Any]:
    return {
        "strategy": "fsdp2",
        "optim": {"lr": cfg.lr, "weight_decay": cfg.weight_decay, "clip_grad": cfg.grad_clip},
        "fsdp": _fsdp(cfg, cpu),
        "model": _model(model_path, cpu),
        "cliprange_value": cfg.value_clip,
        "ppo_max_token_len_per_gpu": cfg.micro_batch_tokens,
    }


def verl_config(cfg: TrainConfig, run_dir: Path, model_path: str, *, device: str) -> dict[str, Any]:
    """verl's config for ``cfg`` (as nested overrides of verl's ``ppo_trainer``), the config's
    ``verl:`` section merged last."""
    _refuse_native_only(cfg)
    run_dir = Path(run_dir).resolve()
    prompt_len, response_len = lengths(cfg)
    cpu = device == "cpu"
    params = {**get_algorithm(cfg.algorithm).params, **cfg.algo_params}
    out: dict[str, Any] = {
        "agentgym": agentgym_settings(cfg, run_dir),
        "data": {
            "train_files": str(run_dir / "data" / "train.parquet"),
            "val_files": str(run_dir / "data" / "val.parquet"),
            "train_batch_size": cfg.tasks_per_step,
            "max_prompt_length": prompt_len,
            "max_response_length": response_len,
            "dataloader_num_workers": 0,
            "seed": cfg.seed,
            "shuffle": False,  # train.parquet holds the native sampler's draws, in order
        },
        "actor_rollout_ref": {
            "model": _model(model_path, cpu),
            "actor": _actor(cfg, cpu),
            "ref": {"strategy": "fsdp2", "fsdp_config": _fsdp(cfg, cpu), "use_torch_compile": not cpu},
            "rollout": _rollout(cfg, run_dir, device),
        },
        "critic": _critic(cfg, model_path, cpu),
        "algorithm": {
            "adv_estimator": estimator_name(cfg.algorithm),
            "gamma": float(params.get("gamma", 1.0)),
            "lam": float(params.get("lam", 1.0)),
            "norm_adv_by_std_in_grpo": bool(params.get("norm_by_std", True)),
            "use_kl_in_reward": False,
            "agentgym_params": dict(cfg.algo_params),  # a bridged plugin algorithm's parameters
        },
        "trainer": _trainer(cfg, run_dir, cpu),
        # our agent loop scores its episodes itself: verl's reward workers only pass the score on
        **({"reward": {"num_workers": 1}} if cpu else {}),
        "transfer_queue": {
            "enable": True,
            "backend": {"SimpleStorage": {"num_data_storage_units": 1 if cpu else 8}},
        },
    }
    try:
        merged = deep_merge(out, cfg.verl)
    except Exception as exc:  # noqa: BLE001 - a malformed section names itself
        raise AgentGymError(f"verl: section could not be merged: {exc}") from exc
    _check(cfg, merged)
    trainer = merged["trainer"]
    if cpu and not merged.get("ray_kwargs", {}).get("ray_init", {}).get("address"):
        # Ray counts one logical GPU per trainer worker and verl's resource pools ask for a few
        # CPUs beside each: logical counts (the cores are shared anyway); a running cluster has its own
        gpus = int(trainer.get("nnodes", 1)) * int(trainer.get("n_gpus_per_node", 1))
        ray_init = {"num_gpus": gpus, "num_cpus": max(8, 4 * gpus, os.cpu_count() or 1)}
        merged = deep_merge(merged, {"ray_kwargs": {"ray_init": ray_init}})
    return merged


#: verl keys that decide which rows of train.parquet (the native sampler's draws) a step plays,
#: and the key of ours each is set from
_DRAWS = (
    (("data", "train_batch_size"), "tasks_per_step"),
    (("data", "shuffle"), "the native sampler's draws (always off)"),
    (("trainer", "total_training_steps"), "steps"),
    (("actor_rollout_ref", "rollout", "n"), "n"),
)


def _check(cfg: TrainConfig, merged: dict[str, Any]) -> None:
    """What verl would otherwise fail on late or quietly (after the ``verl:`` section is merged)."""
    trainer, data = merged["trainer"], merged["data"]
    if not trainer.get("use_v1", True) or trainer["v1"]["trainer_mode"] != "sync":
        raise ConfigError(
            "the verl backend runs verl's v1 trainer in sync mode (trainer.use_v1, trainer.v1.trainer_mode)"
        )
    width = int(data["max_prompt_length"]) + int(data["max_response_length"])
    tokens = int(merged["actor_rollout_ref"]["actor"]["ppo_max_token_len_per_gpu"])
    if tokens < width:
        raise ConfigError(
            f"micro_batch_tokens ({tokens}) must hold one whole episode (prompt + response = {width} tokens)"
        )
    for keys, ours in _DRAWS:  # train.parquet holds exactly these draws, read in order
        where: Any = cfg.verl
        for key in keys:
            where = where.get(key, {}) if isinstance(where, dict) else {}
        if where != {}:
            raise ConfigError(f"verl: {'.'.join(keys)} is set from {ours}: set that key instead")
    if cfg.max_new_tokens > int(data["max_response_length"]):
        raise ConfigError(
            f"max_new_tokens ({cfg.max_new_tokens}) exceeds the response width ({data['max_response_length']})"
        )
