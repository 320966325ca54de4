"""``agentgym eval``, ``agentgym collect`` and ``agentgym tiny``, added to the CLI through ``agentgym_cli``."""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from agentgym.errors import AgentGymError
from agentgym_train.tiny import SIZES


def _console() -> Any:
    from agentgym.cli import console

    return console


def _split_envs(value: tuple[str, ...]) -> list[str]:
    names = [n.strip() for v in value for n in v.split(",") if n.strip()]
    if not names:
        raise click.BadParameter("give at least one env name", param_hint="--env")
    from agentgym.errors import AgentGymError
    from agentgym.plugins import get_registry

    registry = get_registry()
    for n in names:
        try:
            registry.env(n)  # unknown, or unavailable through a plugin problem: says which
        except AgentGymError as exc:
            raise click.BadParameter(exc.message, param_hint="--env") from None
    return names


def policy_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Options that pick and configure a policy backend (shared by eval and collect)."""
    options = [
        click.option(
            "--policy",
            default="hf",
            show_default=True,
            help="Policy backend: hf, openai, vllm, scripted, or a plugin's.",
        ),
        click.option(
            "--model",
            help="Model: a local HF directory (hf, vllm), or the model name an API serves (openai).",
        ),
        click.option(
            "--base-url",
            envvar="OPENAI_BASE_URL",
            help="openai: endpoint, e.g. http://127.0.0.1:8000/v1 [env OPENAI_BASE_URL].",
        ),
        click.option("--api-key", envvar="OPENAI_API_KEY", help="openai: API key [env OPENAI_API_KEY]."),
        click.option(
            "--concurrency",
            default=16,
            show_default=True,
            type=click.IntRange(1),
            help="openai: requests in flight.",
        ),
        click.option("--device", help="hf: torch device (default: cuda if available, else cpu)."),
        click.option(
            "--temperature", default=1.0, show_default=True, type=click.FloatRange(0), help="0 = greedy."
        ),
        click.option("--top-p", default=1.0, show_default=True, type=click.FloatRange(0, 1)),
        click.option(
            "--max-new-tokens", default=256, show_default=True, type=click.IntRange(1), help="Per turn."
        ),
        click.option("--seed", default=0, show_default=True, type=int, help="Sampling seed."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _show_bounds(envs: list[str], env_urls: tuple[str, ...], max_instances: int | None) -> None:
    """One line per env: how many instances are held at once, and why."""
    from agentgym.plugins import get_env_spec
    from agentgym.resources import instance_bound

    if env_urls:
        return  # the servers bound their own instances (GET /health shows it)
    for name in envs:
        bound = instance_bound(get_env_spec(name).cost, override=max_instances)
        _console().print(f"[dim]{name}: {bound.explain()}[/dim]", highlight=False)


def env_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option(
            "--env",
            "env_names",
            multiple=True,
            required=True,
            help="Env name(s): --env babyai,textcraft or repeated.",
        ),
        click.option(
            "--env-url",
            "env_urls",
            multiple=True,
            help="Env server URL(s) (agentgym serve); repeat for several. Default: envs in-process.",
        ),
        click.option(
            "--token", envvar="AGENTGYM_TOKEN", help="Bearer token of the env servers [env AGENTGYM_TOKEN]."
        ),
        click.option(
            "--max-turns", type=click.IntRange(1), help="Turn cap per episode (default: each env's own)."
        ),
        click.option(
            "--batch-size",
            default=64,
            show_default=True,
            type=click.IntRange(1),
            help="Episodes run at once.",
        ),
        click.option("--limit", type=click.IntRange(1), help="Only the first N task ids of the split."),
        click.option(
            "--env-threads",
            default=1,
            show_default=True,
            type=click.IntRange(1),
            help="Threads stepping in-process envs.",
        ),
        click.option(
            "--max-instances",
            type=click.IntRange(1),
            default=None,
            help="In-process env instances held at once per env; episodes beyond wait (default: from "
            "the env's declared cost and this machine's cores and memory).",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def build_policy(policy: str, **kw: Any) -> Any:
    from agentgym_train.policies import make_policy

    options: dict[str, Any] = {}
    if policy in ("hf", "vllm"):
        if not kw.get("model"):
            raise AgentGymError(
                f"--policy {policy} needs --model PATH (a local Hugging Face model directory)"
            )
        options["model"] = kw["model"]
        if policy == "hf" and kw.get("device"):
            options["device"] = kw["device"]
    elif policy == "openai":
        options.update(
            model=kw.get("model"),
            base_url=kw.get("base_url"),
            api_key=kw.get("api_key"),
            concurrency=kw.get("concurrency", 16),
        )
    elif kw.get("model"):
        options["model"] = kw["model"]
    return make_policy(policy, **options)


def _sampling(kw: dict[str, Any]) -> Any:
    from agentgym_train.policies.base import Sampling

    return Sampling(
        temperature=kw["temperature"], top_p=kw["top_p"], max_new_tokens=kw["max_new_tokens"], seed=kw["seed"]
    )


def _progress(total: int, label: str) -> Progress:
    return Progress(
        TextColumn(f"[bold]{label}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        console=_console(),
        transient=False,
        disable=not _console().is_terminal and not os.environ.get("AGENTGYM_PROGRESS"),
    )


def _advance(progress: Progress, bar: Any, _episode: Any) -> None:
    progress.update(bar, advance=1)


def _quiet_transformers() -> None:
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    except ImportError:
        pass


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def report_tables(report: dict[str, Any]) -> list[Any]:
    from rich.table import Table

    main = Table(title=f"policy {report['policy']} · {report['strategy']}")
    for col in (
        "env",
        "split",
        "tasks",
        "n",
        "success %",
        "Avg@n",
        "Pass@n %",
        "mean turns",
        "errors",
        "terminations",
    ):
        main.add_column(col, justify="left" if col in ("env", "split", "terminations") else "right")
    cats = Table(title="per category")
    for col in ("env", "category", "tasks", "success %", "Avg@n", "Pass@n %"):
        cats.add_column(col, justify="left" if col in ("env", "category") else "right")
    for env, r in report["envs"].items():
        terms = ", ".join(f"{k} {v}" for k, v in r["terminations"].items())
        main.add_row(
            env,
            r["split"],
            str(r["tasks"]),
            str(r["n"]),
            _pct(r["success"]),
            f"{r['avg']:.3f}",
            _pct(r["pass"]),
            f"{r['mean_turns']:.1f}",
            str(r["errors"]),
            terms,
        )
        for c, cr in r["categories"].items():
            cats.add_row(env, c, str(cr["tasks"]), _pct(cr["success"]), f"{cr['avg']:.3f}", _pct(cr["pass"]))
    return [main, cats]


@click.command("eval")
@env_options
@click.option("--split", default="test", show_default=True, help="Split to evaluate on.")
@click.option(
    "--n", "n", default=1, show_default=True, type=click.IntRange(1), help="Samples per task (Avg@n, Pass@n)."
)
@click.option("--strategy", type=click.Choice(["react", "reflexion"]), default="react", show_default=True)
@click.option(
    "--trials", default=3, show_default=True, type=click.IntRange(1), help="reflexion: trials per task."
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False),
    help="Report JSON (episodes go next to it as <name>.episodes.jsonl). Default: runs/eval/<time>/report.json.",
)
@policy_options
def eval_command(
    env_names,
    env_urls,
    token,
    max_turns,
    batch_size,
    limit,
    env_threads,
    max_instances,
    split,
    n,
    strategy,
    trials,
    output,
    **kw,
):
    """Evaluate a policy on envs' test (or any) split: success, Avg@n, Pass@n, turns, per category.

    \b
    agentgym eval --env babyai --split test --policy scripted --output r.json
    agentgym eval --env babyai --policy hf --model ./tiny --n 4 --max-turns 20
    agentgym eval --env babyai --policy hf --model ./tiny --env-url http://127.0.0.1:36001
    agentgym eval --env babyai --policy openai --base-url http://127.0.0.1:8000/v1 --model my-model

    Episodes whose env failed are counted under errors and left out of the scores.
    """
    from agentgym_train.evaluate import evaluate, save, split_ids

    envs = _split_envs(env_names)
    total = sum(len(split_ids(e, split, limit)) for e in envs) * n  # checks the split before loading a model
    _quiet_transformers()
    policy = build_policy(**kw)
    _show_bounds(envs, env_urls, max_instances)
    counts = {"ok": 0, "success": 0}
    with _progress(total, f"eval {kw['policy']}") as progress:
        bar = progress.add_task("eval", total=total, status="")

        def on_episode(ep: Any) -> None:
            counts["ok"] += 1
            counts["success"] += int(ep.success)
            progress.update(bar, advance=1, status=f"success {counts['success']}/{counts['ok']}")

        report, episodes = evaluate(
            envs,
            policy,
            split=split,
            n=n,
            max_turns=max_turns,
            urls=env_urls,
            token=token,
            batch_size=batch_size,
            sampling=_sampling(kw),
            strategy=strategy,
            trials=trials,
            limit=limit,
            env_threads=env_threads,
            on_episode=on_episode,
            max_instances=max_instances,
        )
    report["model"] = kw.get("model")
    if output is None:
        output = Path("runs") / "eval" / time.strftime("%Y%m%d-%H%M%S") / "report.json"
    report_path, ep_path = save(report, episodes, output)
    for table in report_tables(report):
        _console().print(table)
    _console().print(f"report: {report_path}\nepisodes: {ep_path}")


@click.command("collect")
@env_options
@click.option("--split", default="train", show_default=True)
@click.option("--n", "n", default=1, show_default=True, type=click.IntRange(1), help="Episodes per task.")
@click.option(
    "--keep",
    type=click.Choice(["success", "all"]),
    default="success",
    show_default=True,
    help="Keep successful episodes only, or all.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["episodes", "agentgym"]),
    default="episodes",
    show_default=True,
    help="agentgym = AgentGym's conversation format.",
)
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False), help="JSONL file to write.")
@policy_options
def collect_command(
    env_names,
    env_urls,
    token,
    max_turns,
    batch_size,
    limit,
    env_threads,
    max_instances,
    split,
    n,
    keep,
    fmt,
    output,
    **kw,
):
    """Collect episodes (expert demonstrations with --policy scripted) as JSONL for SFT or DPO.

    Without --limit, the first 1,000 task ids of the split (train splits can be huge).

    \b
    agentgym collect --env babyai --policy scripted --split train --limit 500 --output demos.jsonl
    agentgym collect --env babyai --policy scripted --format agentgym --output demos_agentgym.json
    """
    from agentgym.plugins import get_env_spec
    from agentgym.trajectory import export_agentgym, write_episodes
    from agentgym_train.envs import make_backend
    from agentgym_train.evaluate import split_ids
    from agentgym_train.rollout import RolloutEngine, Task

    envs = _split_envs(env_names)
    task_ids = {
        name: split_ids(name, split, limit or 1000) for name in envs
    }  # bad input fails before any work
    _quiet_transformers()
    if kw["policy"] == "hf" and not kw.get("model"):
        kw["policy"] = "scripted"  # the natural default for demonstrations
    policy = build_policy(**kw)
    _show_bounds(envs, env_urls, max_instances)
    kept: list[Any] = []
    seen = 0
    for name in envs:
        spec = get_env_spec(name)
        ids = task_ids[name]
        backend = make_backend(spec, env_urls, token=token, threads=env_threads, max_instances=max_instances)
        with _progress(len(ids) * n, f"collect {name}") as progress:
            bar = progress.add_task("collect", total=len(ids) * n, status="")
            engine = RolloutEngine(
                policy,
                {name: backend},
                chat=getattr(policy, "chat", None),
                sampling=_sampling(kw),
                max_turns=max_turns or spec.default_max_turns,
                batch_size=batch_size,
                on_episode=functools.partial(_advance, progress, bar),
            )
            episodes = engine.run([Task(name, t, sample=k, split=split) for t in ids for k in range(n)])
        seen += len(episodes)
        kept += [e for e in episodes if keep == "all" or e.success]
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    written = export_agentgym(kept, output) if fmt == "agentgym" else write_episodes(output, kept)
    _console().print(f"{written} of {seen} episodes written to {output} ({fmt} format, keep={keep})")


@click.command("tiny")
@click.argument("output", type=click.Path(file_okay=False))
@click.option(
    "--env",
    "env_names",
    multiple=True,
    default=("babyai",),
    show_default=True,
    help="Envs whose expert text trains the tokenizer.",
)
@click.option(
    "--tasks",
    default=100,
    show_default=True,
    type=click.IntRange(1),
    help="Expert episodes per env for the tokenizer.",
)
@click.option("--vocab-size", default=2048, show_default=True, type=click.IntRange(300))
@click.option("--arch", type=click.Choice(["qwen2", "llama"]), default="qwen2", show_default=True)
@click.option("--size", type=click.Choice(list(SIZES)), default="small", show_default=True)
@click.option("--seed", default=0, show_default=True, type=int)
def tiny_command(output, env_names, tasks, vocab_size, arch, size, seed):
    """Build a tiny chat model and tokenizer locally (no download) into OUTPUT, loadable by --policy hf.

    The tokenizer is trained on the envs' expert episodes; the model is randomly initialised (train
    it with agentgym sft / train).
    """
    import json

    from agentgym_train.tiny import build_tiny

    _quiet_transformers()
    envs = _split_envs(env_names)
    path = build_tiny(
        output, envs=envs, tasks_per_env=tasks, vocab_size=vocab_size, arch=arch, size=size, seed=seed
    )
    meta = json.loads((path / "agentgym_tiny.json").read_text())
    _console().print(
        f"tiny model ({meta['parameters']:,} parameters, vocabulary {meta['vocab_size']}) written to {path}"
    )


def register(cli: click.Group) -> None:
    from agentgym_train.cli_train import COMMANDS

    for command in (eval_command, collect_command, tiny_command, *COMMANDS):
        cli.add_command(command)
