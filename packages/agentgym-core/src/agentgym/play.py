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
        episode = _new_episode(spec, task_id, observation, info, auto=auto, max_turns=max_turns)
        console.print(
            Panel(info.get("instruction", ""), title=f"{spec.name} · task {task_id}", title_align="left")
        )
        _show_step(console, observation, info, None, 0.0)
        if not auto:
            console.print("[dim]:help for play commands[/dim]")
        player = _Player(console, _Expert(spec, env, remote), auto=auto, input_fn=input_fn)
        stopped = _play_turns(env, episode, player, info, max_turns)
        _finish(console, episode, stopped)
        return episode
    finally:
        env.close()


class _Expert:
    """The expert's suggestion for this turn: the server's over HTTP, else a local expert made on first use."""

    def __init__(self, spec: EnvSpec, env: Any, remote: bool) -> None:
        self.spec, self.env, self.remote = spec, env, remote
        self.act: Any = None

    def suggest(self, info: dict[str, Any]) -> str:
        if self.remote:
            return self.env.expert_action()
        if self.act is None:
            self.act = self.spec.make_expert(self.env)
        return self.act(self.env.last_observation, info)


class _Player:
    """Who picks each action: the expert (``auto``), or a person typing actions and play commands."""

    def __init__(self, console: Console, expert: _Expert, *, auto: bool, input_fn: Any) -> None:
        self.console, self.expert, self.auto, self.input_fn = console, expert, auto, input_fn

    def action(self, info: dict[str, Any], turn: int, max_turns: int) -> str | None:
        """The next action, or None when the player stops (``:quit`` or end of input)."""
        if self.auto:
            action = self.expert.suggest(info)
            self.console.print(f"[bold cyan]expert>[/bold cyan] {action}")
            return action
        while True:
            try:
                action = self.input_fn(f"[{turn}/{max_turns}] action> ")
            except EOFError:
                self.console.print("end of input: stopping")
                return None
            command = action.strip().lower()
            if command in (":q", ":quit", ":exit"):
                return None
            if not self._run_command(command, info):
                return action

    def _run_command(self, command: str, info: dict[str, Any]) -> bool:
        """Carry out a play command (``:help``, ``:expert``, ``:actions``); False if it is none."""
        if command in (":h", ":help"):
            self.console.print(HELP)
        elif command == ":expert":
            try:
                self.console.print(f"expert suggests: [bold]{self.expert.suggest(info)}[/bold]")
            except (LookupError, AgentGymError) as exc:
                self.console.print(f"[yellow]{exc}[/yellow]")
        elif command == ":actions":
            self.console.print(info.get("available_actions") or "this env has no finite action list")
        else:
            return False
        return True


def _new_episode(
    spec: EnvSpec, task_id: int, observation: str, info: dict[str, Any], *, auto: bool, max_turns: int
) -> Episode:
    """The episode as it stands after reset: the instruction and the first observation."""
    return Episode(
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


def _play_turns(env: Any, episode: Episode, player: _Player, info: dict[str, Any], max_turns: int) -> bool:
    """Step the env with the player's actions until the episode ends or hits ``max_turns``;
    True when the player stopped it."""
    total = 0.0
    while len(episode.steps) < max_turns:
        action = player.action(info, len(episode.steps) + 1, max_turns)
        if action is None:
            return True
        observation, reward, terminated, truncated, info = env.step(action)
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
        _show_step(player.console, observation, info, reward, total)
        if terminated or truncated:
            break
    return False


def _finish(console: Console, episode: Episode, stopped: bool) -> None:
    """Close the episode's books, say how it ended, and tell the plugins."""
    episode.finish()
    if stopped and episode.termination == "max_turns":  # the player stopped, not the turn cap
        episode.termination = "stopped"
    console.print(
        f"[bold]{episode.termination}[/bold] after {episode.num_turns} turn(s), return {episode.return_:.3f}, "
        f"success {episode.success}"
    )
    _notify(episode)


def _notify(episode: Episode) -> None:
    from agentgym.plugins import get_registry

    get_registry().pm.hook.agentgym_episode_end(episode=episode)


def demo_env() -> str:
    """The env ``agentgym demo`` plays when none is named: the first installed env, by name, that has
    an expert, preferring those that need nothing outside Python (``requires``)."""
    from agentgym.plugins import env_specs

    with_expert = sorted(env_specs().items(), key=lambda item: (bool(item[1].requires), item[0]))
    for name, spec in with_expert:
        if spec.expert is not None:
            return name
    raise AgentGymError(
        "no installed env has an expert to play: install one (pip install agentgym-env-babyai) "
        "or name one with --env",
        code="no_demo_env",
    )


def run_demo(env_name: str | None, *, episodes: int = 3, console: Console | None = None) -> list[Episode]:
    """Serve ``env_name`` (default: :func:`demo_env`) on a free port and play its expert over HTTP
    for a few test tasks."""
    from agentgym.plugins import get_env_spec
    from agentgym.server.background import serve_in_thread

    console = console or Console()
    env_name = env_name or demo_env()
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
