"""``agentgym play`` and ``agentgym demo``: a person (or the expert) plays an env in the terminal."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.panel import Panel

from agentgym.errors import AgentGymError
from agentgym.spec import EnvSpec
from agentgym.trajectory import Episode, Message, Step

HELP = """Type an action and press Enter. Play commands:
  :help      this help
  :expert    show the expert's suggestion for this turn
  :actions   show the available actions
  :quit      stop (the episode is kept as played so far)"""


def _show_step(
    console: Console, observation: str, info: dict[str, Any], reward: float | None, total: float
) -> None:
    console.print(Panel(observation, title="observation", title_align="left"))
    actions = info.get("available_actions")
    if actions:
        console.print(f"[bold]Available actions:[/bold] {', '.join(map(str, actions))}")
    if reward is not None:
        valid = "" if info.get("valid_action", True) else "  [yellow](invalid action)[/yellow]"
        console.print(f"reward {reward:+.3f}   return {total:.3f}{valid}")


def play_episode(
    spec: EnvSpec,
    task_id: int,
    *,
    url: str | None = None,
    token: str | None = None,
    max_turns: int = 20,
    auto: bool = False,
    console: Console | None = None,
    input_fn: Any = input,
) -> Episode | None:
    """Play one episode interactively (or watch the expert with ``auto``); returns the episode."""
    from agentgym.client import RemoteEnv

    console = console or Console()
    remote = url is not None
    env: Any = RemoteEnv(url, spec.name, token=token) if remote else spec.make()
    try:
        observation, info = env.reset(options={"task_id": task_id})
        expert = None

        def suggestion() -> str:
            nonlocal expert
            if remote:
                return env.expert_action()
            if expert is None:
                expert = spec.make_expert(env)
            return expert(env.last_observation, last_info)

        last_info = info
        episode = Episode(
            env=spec.name,
            task_id=task_id,
            split=spec.split_of(task_id),
            category=info.get("category"),
            policy="expert" if auto else "human",
            max_turns=max_turns,
            messages=[
                Message(role="system", content=info.get("instruction", "")),
                Message(role="user", content=observation),
            ],
        )
        console.print(
            Panel(info.get("instruction", ""), title=f"{spec.name} · task {task_id}", title_align="left")
        )
        _show_step(console, observation, info, None, 0.0)
        if not auto:
            console.print("[dim]:help for play commands[/dim]")
        total, stopped = 0.0, False
        while len(episode.steps) < max_turns:
            if auto:
                action = suggestion()
                console.print(f"[bold cyan]expert>[/bold cyan] {action}")
            else:
                try:
                    action = input_fn(f"[{len(episode.steps) + 1}/{max_turns}] action> ")
                except EOFError:
                    console.print("end of input: stopping")
                    stopped = True
                    break
                command = action.strip().lower()
                if command in (":q", ":quit", ":exit"):
                    stopped = True
                    break
                if command in (":h", ":help"):
                    console.print(HELP)
                    continue
                if command == ":expert":
                    try:
                        console.print(f"expert suggests: [bold]{suggestion()}[/bold]")
                    except (LookupError, AgentGymError) as exc:
                        console.print(f"[yellow]{exc}[/yellow]")
                    continue
                if command == ":actions":
                    console.print(last_info.get("available_actions") or "this env has no finite action list")
                    continue
            observation, reward, terminated, truncated, info = env.step(action)
            last_info = info
            total += reward
            episode.messages += [
                Message(role="assistant", content=action),
                Message(role="user", content=observation),
            ]
            episode.steps.append(
                Step(
                    raw_output=action,
                    action=action,
                    observation=observation,
                    reward=reward,
                    terminated=terminated,
                    truncated=truncated,
                    info=info,
                )
            )
            _show_step(console, observation, info, reward, total)
            if terminated or truncated:
                break
        episode.finish()
        if stopped and episode.termination == "max_turns":  # the player stopped, not the turn cap
            episode.termination = "stopped"
        console.print(
            f"[bold]{episode.termination}[/bold] after {episode.num_turns} turn(s), return {episode.return_:.3f}, "
            f"success {episode.success}"
        )
        _notify(episode)
        return episode
    finally:
        env.close()


def _notify(episode: Episode) -> None:
    from agentgym.plugins import get_registry

    get_registry().pm.hook.agentgym_episode_end(episode=episode)


def run_demo(env_name: str, *, episodes: int = 3, console: Console | None = None) -> list[Episode]:
    """Serve ``env_name`` on a free port and play its expert over HTTP for a few test tasks."""
    from agentgym.plugins import get_env_spec
    from agentgym.server.background import serve_in_thread

    console = console or Console()
    spec = get_env_spec(env_name)
    split = spec.splits.get("test") or next(iter(spec.splits.values()))
    done = []
    with serve_in_thread([env_name]) as url:
        console.print(f"serving {env_name} at {url}")
        for task_id in list(split.task_ids)[:episodes]:
            done.append(
                play_episode(
                    spec, task_id, url=url, auto=True, console=console, max_turns=spec.default_max_turns
                )
            )
    wins = sum(ep.success for ep in done)
    console.print(f"[bold]demo:[/bold] the expert solved {wins}/{len(done)} task(s) over HTTP")
    return done
