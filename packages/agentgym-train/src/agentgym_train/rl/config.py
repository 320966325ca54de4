"""The trainer's configuration: one dataclass, loaded from YAML and ``key=value`` overrides.

Every key is checked: an unknown key names the closest known one, a value of the wrong type
names the key and the expected type, and cross-field rules (an algorithm that compares samples of
one task needs ``n >= 2``...) fail before a model loads.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentgym.errors import AgentGymError, UnknownNameError
from agentgym_train.models.tiny import SIZES
from agentgym_train.rollout.envs import read_env_token
from agentgym_train.rollout.task_sampling import TaskPool

#: The samplers the native trainer rolls out with (``rollout``).
ROLLOUTS = ("hf", "vllm")


class ConfigError(AgentGymError, ValueError):
    """A configuration that cannot run; the message says which key and why."""


@dataclass
class TrainConfig:
    # -- run ---------------------------------------------------------------------------------
    name: str = "default"  #: run directory: <runs_dir>/<name>
    runs_dir: str = "runs"
    seed: int = 0
    # -- model -------------------------------------------------------------------------------
    model: str | None = None  #: a Hugging Face model directory; none: build the tiny model
    tiny_size: str = "nano"  #: tiny model size when no model is given (nano, small, base)
    tiny_tasks: int = 100  #: expert episodes per env the tiny tokenizer is trained on
    lora: bool = False  #: train LoRA adapters (peft) instead of all weights
    lora_r: int = 8
    lora_alpha: int = 16
    #: auto: float32 weights for a full fine-tune; a bfloat16 base under LoRA and for sampling where
    #: the hardware computes in bfloat16 natively (GPU, CPU with AMX/AVX512-BF16); or float32, bfloat16
    dtype: str = "auto"
    #: recompute each layer's activations in backward instead of keeping them (less memory, about
    #: a third more update time)
    gradient_checkpointing: bool = False
    # -- data --------------------------------------------------------------------------------
    envs: list[str] = field(default_factory=lambda: ["babyai"])
    train_split: str = "train"
    train_limit: int | None = None  #: draw train tasks from the first N ids of each env's split
    train_categories: list[str] | None = None  #: only these categories of the train split (e.g. levels)
    #: how each step's tasks are drawn (``agentgym plugins`` lists the samplers): uniform, or
    #: difficulty (tasks whose estimated pass rate is near ``target``; its state is checkpointed)
    task_sampler: str = "uniform"
    #: keyword arguments of the sampler (difficulty: target, width, explore, prior, strength, decay)
    task_sampler_params: dict[str, Any] = field(default_factory=dict)
    val_split: str = "test"
    val_every: int = 0  #: validate every k steps (0: before the first and after the last only)
    #: validate before the first step (off where the starting model's score is measured already,
    #: e.g. several RL seeds from one SFT model)
    val_before: bool = True
    val_limit: int | None = None  #: validate on N tasks of each env, spread over its categories
    val_n: int = 2  #: samples per validation task
    val_temperature: float = 1.0
    val_max_turns: int | None = None  #: turn cap in validation (default: each env's own)
    #: the learning curve: greedy success on ``curve_tasks`` test tasks an env (spread evenly over
    #: the split's categories), before the first step, every ``curve_every`` steps and after the
    #: last (0: off), in a line of the log, ``curve_success`` of that step's metrics, the report
    #: and ``plots/success.png``
    curve_every: int = 0
    curve_tasks: int = 30
    # -- rollout -----------------------------------------------------------------------------
    algorithm: str = "grpo"
    algo_params: dict[str, Any] = field(default_factory=dict)
    steps: int = 20
    tasks_per_step: int = 8
    n: int = 4  #: samples per task (a group, for grpo/rloo)
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 48
    max_context: int | None = 2048
    rollout_batch: int = 64  #: concurrent episodes
    #: env instances held at once per env (none: from the env's declared cost and the machine);
    #: episodes beyond wait for one to free up
    max_instances: int | None = None
    #: sample every episode from its own random stream (seed, step, env, task, sample, turn), so
    #: that its episodes do not depend on what ran beside them (rollout_batch, max_instances);
    #: off: one stream shared by the whole batch
    episode_seeds: bool = True
    #: the score trained on: ``return`` (env rewards summed), ``success`` (0/1), or the name of a
    #: reward transform (``agentgym plugins`` lists them: format_penalty, step_penalty, ...), the
    #: score then being the sum of its per-step rewards
    reward: str = "return"
    reward_params: dict[str, Any] = field(default_factory=dict)  #: keyword arguments of the transform
    #: turn-level credit: subtracted from the advantage of the sampled tokens of each turn whose
    #: action the env rejected or the parser could not read, and of no other turn (0: off)
    invalid_action_penalty: float = 0.0
    #: a reply the env's parser cannot read, naming exactly one of the actions the env lists, is
    #: taken as that action (the step's ``info["matched_action"]`` says so); off: a format error
    match_actions: bool = False
    #: state the parser's reply format, with an example, in the system prompt, and remind the model
    #: of it under every observation (for models that do not follow the env's prompt on their own)
    format_hint: bool = False
    #: where the env lists its actions, decode each reply constrained to one of them, written in the
    #: parser's format (the hf policy; for evaluation: the trained log-probs are the model's own)
    constrain_actions: bool = False
    #: the sampler: hf (the learner's own model) or vllm (a vLLM engine in this process, given the
    #: trained weights after every update, as TRL's colocate mode; needs vLLM)
    rollout: str = "hf"
    #: rollout=vllm: the engine's KV cache in GB (null: 1 GB on a CPU, vLLM's share of a GPU's
    #: memory there). Its pages are resident from the start: each GB given back is a GB less peak
    rollout_kv_cache_gb: float | None = None
    # -- horizon -----------------------------------------------------------------------------
    horizon: str = "scaling_inter"
    horizon_params: dict[str, Any] = field(default_factory=lambda: {"rounds": [6, 13, 20], "every": 100})
    # -- optimisation ------------------------------------------------------------------------
    lr: float = 1e-5
    weight_decay: float = 0.0
    warmup_steps: int = 0
    grad_clip: float = 1.0
    ppo_epochs: int = 1
    #: optimizer steps per epoch: the rollout batch is shuffled and cut into this many parts
    #: (verl's ppo_mini_batch_size = batch / mini_batches); advantages use the whole batch
    mini_batches: int = 1
    #: DAPO's dynamic sampling: when fewer than ``tasks_per_step`` of a step's groups are
    #: informative (some sample has a nonzero advantage), roll out that many more tasks, up to
    #: ``dynamic_sampling_rounds`` times (groups whose samples all scored the same are never
    #: trained on, on or off)
    dynamic_sampling: bool = False
    dynamic_sampling_rounds: int = 3
    micro_batch_tokens: int = 8192  #: padded tokens per forward pass (gradient accumulation)
    #: rows that open with the same prompt (a task's samples) run it once in the update, its keys
    #: and values shared (native backend; not beside a critic or under gradient checkpointing).
    #: Off: on a CPU the rows' attention then takes an explicit mask and computes every block,
    #: which cost more than the prompt saved (bench/speed/rl_memory.py)
    share_prompts: bool = False
    clip_ratio: float = 0.2
    clip_ratio_high: float | None = None
    kl_coef: float = 0.001
    kl_kind: str = "low_var_kl"
    entropy_coef: float = 0.001
    loss_agg: str = "token-mean"
    value_coef: float = 0.5  #: critic loss weight (gae)
    value_clip: float = 0.5
    # -- backends ----------------------------------------------------------------------------
    #: env servers (``agentgym serve``) the verl backend's agent loops play on; none: envs in the
    #: agent-loop workers (the native trainer always runs them in-process)
    env_urls: list[str] = field(default_factory=list)
    #: a file holding the env servers' bearer token (else ``$AGENTGYM_TOKEN``); the token itself
    #: is never a key: config files are written into the run directory and into trackers
    env_token_file: str | None = None
    #: verl's own config keys, merged last over what ``--backend verl`` derives from this config
    #: (nested, verl's names: ``{trainer: {nnodes: 2}, actor_rollout_ref: {rollout: {name: sglang}}}``)
    verl: dict[str, Any] = field(default_factory=dict)
    # -- checkpoints -------------------------------------------------------------------------
    save_every: int = 0  #: checkpoint every N steps (0: at the end only)
    resume: bool = True  #: continue from the run's last checkpoint when there is one
    progress: bool = True
    #: where each step's metrics go besides metrics.jsonl and the plots (verl's trainer.logger names):
    #: console (the line agentgym train prints), tensorboard (<run>/tensorboard), wandb (<run>/wandb,
    #: offline unless WANDB_MODE is set)
    logger: list[str] = field(default_factory=lambda: ["console"])

    # -- loading -----------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()) -> TrainConfig:
        """From a YAML file (optional) then ``key=value`` overrides (values parsed as YAML)."""
        import yaml

        data: dict[str, Any] = {}
        if path is not None:
            p = Path(path)
            if not p.is_file():
                raise ConfigError(f"config file not found: {p}")
            try:
                loaded = yaml.safe_load(p.read_text()) or {}
            except yaml.YAMLError as exc:
                raise ConfigError(f"{p}: not valid YAML ({exc})") from None
            if not isinstance(loaded, dict):
                raise ConfigError(f"{p}: expected a mapping of keys to values")
            data.update(loaded)
        data.update(parse_overrides(overrides))
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        fields = {f.name: f for f in dataclasses.fields(cls)}
        hints = typing.get_type_hints(cls)
        values = {}
        for key, value in data.items():
            if key == "env_token":
                raise ConfigError(
                    "env_token: a secret is not a config key (the config is written into the run "
                    "directory and its trackers); set $AGENTGYM_TOKEN or env_token_file: PATH"
                )
            if key not in fields:
                close = difflib.get_close_matches(key, fields, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ConfigError(f"unknown config key {key!r}{hint}")
            values[key] = _check_type(key, value, hints[key])
        cfg = cls(**values)
        cfg.validate()
        return cfg

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def env_token(self) -> str | None:
        """The env servers' bearer token: ``$AGENTGYM_TOKEN``, else the first line of
        ``env_token_file``; None when neither is set, or without ``env_urls``."""
        return read_env_token(self.env_token_file) if self.env_urls else None

    def train_pool(self) -> TaskPool:
        """The tasks training draws from: ``train_split`` of every env, ``train_limit`` and
        ``train_categories`` applied."""
        return TaskPool.of_split(self.envs, self.train_split, self.train_limit, self.train_categories)

    def episode_seed(self, offset: int) -> int | None:
        """The base of a rollout's per-episode streams (``episode_seeds``): training step ``k``'s
        at ``k`` (a dynamic-sampling round of it at ``k`` plus its first group's number), the
        validation after step ``k`` at ``-1 - k``, below every training base; None with
        ``episode_seeds`` off (one stream for the batch)."""
        return self.seed * 1_000_003 + offset if self.episode_seeds else None

    # -- rules -------------------------------------------------------------------------------
    def validate(self) -> None:
        """Every rule a run needs, before a model loads: ranges, then names (algorithm, horizon
        schedule, reward, envs and their splits)."""
        self._check_ranges()
        self._check_names()

    def _check_ranges(self) -> None:
        positive = (
            "steps",
            "tasks_per_step",
            "n",
            "max_new_tokens",
            "rollout_batch",
            "ppo_epochs",
            "mini_batches",
            "micro_batch_tokens",
            "curve_tasks",
        )
        for key in positive:
            _need(getattr(self, key) >= 1, f"{key} must be >= 1, got {getattr(self, key)}")
        for key in ("max_instances", "val_limit"):
            value = getattr(self, key)
            _need(value is None or value >= 1, f"{key} must be >= 1 (or null), got {value}")
        for key in (
            "val_every",
            "curve_every",
            "save_every",
            "warmup_steps",
            "tiny_tasks",
            "dynamic_sampling_rounds",
        ):
            _need(getattr(self, key) >= 0, f"{key} must be >= 0, got {getattr(self, key)}")
        _need(
            self.rollout_kv_cache_gb is None or self.rollout_kv_cache_gb > 0,
            f"rollout_kv_cache_gb must be > 0 (or null), got {self.rollout_kv_cache_gb}",
        )
        _need(self.lr > 0, f"lr must be > 0, got {self.lr}")
        _need(
            self.invalid_action_penalty >= 0,
            f"invalid_action_penalty must be >= 0, got {self.invalid_action_penalty}",
        )
        _need(0 < self.top_p <= 1, f"top_p must be in (0, 1], got {self.top_p}")
        _need(self.temperature > 0, f"temperature must be > 0 for RL sampling, got {self.temperature}")
        _need(bool(self.envs), "envs must name at least one environment")
        _need(
            self.mini_batches <= self.tasks_per_step * self.n,
            f"mini_batches ({self.mini_batches}) cannot exceed the episodes per step "
            f"(tasks_per_step x n = {self.tasks_per_step * self.n})",
        )

    def _check_names(self) -> None:
        # imported here: the CLI reads configs at start-up, and these registries bring torch
        from agentgym.rewards import reward_transforms
        from agentgym_train.models.device import DTYPES
        from agentgym_train.rl.algorithms import AGG_MODES, KL_KINDS
        from agentgym_train.rl.horizon import make_schedule
        from agentgym_train.rl.specs import get_algorithm
        from agentgym_train.rollout.task_sampling import check_task_sampler
        from agentgym_train.rollout.tasks import get_split
        from agentgym_train.tracking.trackers import TRACKERS

        scores = ["return", "success", *sorted(reward_transforms())]
        _need(self.reward in scores, f"reward must be one of {', '.join(scores)}, got {self.reward!r}")
        _need(
            not self.reward_params or self.reward not in ("return", "success"),
            f"reward_params apply to a reward transform, not to reward {self.reward!r}",
        )
        for key, known in (
            ("kl_kind", KL_KINDS),
            ("loss_agg", AGG_MODES),
            ("dtype", ("auto", *DTYPES)),
            ("tiny_size", tuple(SIZES)),
            ("rollout", ROLLOUTS),
        ):
            value = getattr(self, key)
            _need(value in known, f"{key} must be one of {', '.join(known)}, got {value!r}")
        _need(
            not (self.constrain_actions and self.rollout == "vllm"),
            "constrain_actions needs rollout=hf: the vllm policy decodes freely (it cannot constrain)",
        )
        bad = [name for name in self.logger if name not in TRACKERS]
        if bad:
            raise ConfigError(f"logger: unknown tracker {bad[0]!r}; choose from {', '.join(TRACKERS)}")
        algo = get_algorithm(self.algorithm)
        _need(
            not algo.needs_groups or self.n >= 2,
            f"{self.algorithm} compares samples of one task: n must be >= 2, got {self.n}",
        )
        _need(
            not self.dynamic_sampling or (algo.needs_groups and not algo.needs_critic),
            f"dynamic_sampling keeps the groups whose samples differ: {self.algorithm} compares no groups",
        )
        make_schedule(self.horizon, **self.horizon_params)
        try:
            check_task_sampler(self.task_sampler, self.task_sampler_params)
        except AgentGymError as exc:
            raise ConfigError(f"task_sampler: {exc.message}") from None
        for env in self.envs:
            for split in (self.train_split, self.val_split):
                try:
                    get_split(env, split)
                except UnknownNameError as exc:
                    raise ConfigError(exc.message) from None


def _need(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def parse_overrides(items: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """``key=value`` strings as a dict, each value parsed as YAML (empty: None)."""
    import yaml

    data: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"override {item!r}: expected key=value")
        data[key.strip()] = yaml.safe_load(raw) if raw.strip() else None
    return data


def _check_type(key: str, value: Any, hint: Any) -> Any:
    """``value`` if it fits ``hint`` (ints pass as floats); a ConfigError naming the key if not."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _check_type(key, value, option)
            except ConfigError as exc:
                errors.append(exc)
        raise errors[0] if errors else ConfigError(f"{key}: unexpected value {value!r}")
    if origin is list:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]  # envs=babyai,textcraft
        if not isinstance(value, list):
            raise ConfigError(f"{key} must be a list, got {value!r}")
        (item,) = typing.get_args(hint) or (Any,)
        return [_check_type(key, v, item) for v in value]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key} must be a mapping, got {value!r}")
        return value
    if hint is Any:
        return value
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint is float and isinstance(value, str):
        try:
            return float(value)  # YAML 1.1 reads 1e-6 (no dot) as a string
        except ValueError:
            pass
    if hint is bool and not isinstance(value, bool):
        raise ConfigError(f"{key} must be true or false, got {value!r}")
    if hint is int and isinstance(value, bool):
        raise ConfigError(f"{key} must be an integer, got {value!r}")
    if not isinstance(value, hint):
        raise ConfigError(f"{key} must be {hint.__name__}, got {value!r}")
    return value
