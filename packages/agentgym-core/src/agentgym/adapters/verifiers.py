"""Our envs as verifiers environments (``verifiers`` 0.4, the ``verifiers.v1`` stack).

>>> from agentgym.adapters.verifiers import load_environment
>>> env = load_environment("babyai", split="test", num_tasks=8, max_turns=10)   # a verifiers ``Env``

or verifiers' own eval, by the taskset id ``agentgym_verifiers`` (this module, see below)::

    vf-eval agentgym_verifiers --env.taskset.env babyai -n 8 -m NAME \\
        --client.base-url http://127.0.0.1:8000/v1 --sampling.temperature 0 --no-push

In verifiers 0.4 an environment is a package exporting, through ``__all__``, a ``Taskset`` (the
rows: here one per task id of a split), optionally its ``Env`` (how one task becomes an episode)
and its ``Harness`` (the program that calls the model); ``vf-eval``, the env server and
prime-rl load it by id (``vf.load_environment(EnvConfig)``). This module is that package:
:class:`AgentGymTaskset`, :class:`AgentGymEnv` and :class:`AgentGymHarness`. Its id is
``agentgym_verifiers``: verifiers imports an id as the top-level module of that name (entry points
play no part), and agentgym-core ships one, ``agentgym_verifiers``, that is this module under
that name; so the id loads in any process with nothing imported first.
``python -m agentgym.adapters.verifiers ARGS`` is ``vf-eval agentgym_verifiers ARGS``.

The env plays the run's user, as verifiers' TextArena and OpenEnv tasksets do: its ``run()``
opens the agent's interaction, the first user turn is the env's first observation under our
system prompt (:mod:`agentgym.prompting`), each reply is parsed by the env's action parser
(:mod:`agentgym.parsers`) and stepped, and the next observation is the next user turn, exactly
as our rollout (``agentgym_train.rollout.engine``) builds them: the same model sees the same messages.
The harness is a chat loop run in-process: one completion per turn through verifiers'
interception (so its trace, sampling and client apply), no tools. The task's one reward,
``agentgym_return``, is the episode's return; metrics: ``success``, ``turns``,
``invalid_actions``. The episode itself (steps, actions, observations, rewards, termination) is
kept on ``trace.info["agentgym"]``.

What maps, and what does not:
- An invalid action is an observation (the env's), as everywhere. A reply the parser cannot
  read is a format-error user turn and the env is not stepped; ``max_format_errors`` in a row
  (3) end the episode, as in our rollout.
- ``terminated`` / ``truncated`` / ``max_turns`` (ours: replies, format errors included) end the
  exchange; the trace's ``stop_condition`` says which (``terminated``, ``env_truncated``,
  ``max_turns``, ``format_error``; verifiers counts ``max_turns`` as truncated). A verifiers-side
  limit (the agent's ``max_turns``, token limits) ends it with verifiers' own condition.
- An env or server failure raises in ``run()``: the episode carries the error and no reward,
  never a 0. A failed model call is a harness error, likewise.
- Per-step rewards are summed into the one reward (the return); verifiers has no per-turn reward.
- Not mapped: our reflexion strategy, constrained decoding and token-in/token-out traces (the
  harness is text-level; token ids come from verifiers' train client, not from here); env seeds
  (``reset`` takes none, as in our eval by default).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from typing import Any

from pydantic import Field

from agentgym.adapters import EnvFailure, open_env, require
from agentgym.errors import AgentGymError

vf = require("verifiers.v1", "verifiers")

#: The taskset id verifiers loads this module by (``--env.taskset.id``).
TASKSET_ID = "agentgym_verifiers"


class AgentGymTasksetConfig(vf.TasksetConfig):
    """``--env.taskset.*``: which env, where, which of its tasks, and the agent options."""

    id: str = TASKSET_ID
    env: str = "babyai"
    """An installed AgentGym env (a plugin's too)."""
    url: str | None = None
    """An ``agentgym serve`` URL; None: the env runs in this process."""
    split: str | None = None
    """The split whose task ids are the rows (default: ``test``, else the env's first split)."""
    num_tasks: int | None = None
    """The first ``num_tasks`` ids of the split (default: all)."""
    max_turns: int | None = None
    """Replies per episode, format errors included (default: the env's ``default_max_turns``)."""
    max_format_errors: int = 3
    """Consecutive unreadable replies that end an episode (0: never)."""
    format_hint: bool = False
    """State the reply format in the system prompt and after each observation."""
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Options of the env's constructor (``agentgym.make`` / ``agentgym.connect``)."""


class AgentGymData(vf.TaskData):
    env: str
    task_id: int
    split: str
    url: str | None = None
    max_turns: int
    max_format_errors: int = 3
    format_hint: bool = False
    env_kwargs: dict[str, Any] = Field(default_factory=dict)


def _episode(trace: Any) -> dict[str, Any]:
    episode = trace.info.get("agentgym")
    if episode is None:
        raise EnvFailure("the episode did not finish: no return to score")
    return episode


class AgentGymTask(vf.Task[AgentGymData, vf.State, vf.TaskConfig]):
    @vf.reward
    async def agentgym_return(self, trace) -> float:
        """The episode's return (the sum of the env's step rewards)."""
        return float(_episode(trace)["return"])

    @vf.metric
    async def success(self, trace) -> float:
        return float(_episode(trace)["success"])

    @vf.metric
    async def turns(self, trace) -> float:
        return float(_episode(trace)["num_turns"])

    @vf.metric
    async def invalid_actions(self, trace) -> float:
        return float(
            sum(not s["action"] or not s["info"].get("valid_action", True) for s in _episode(trace)["steps"])
        )


class AgentGymTaskset(vf.Taskset[AgentGymTask, AgentGymTasksetConfig]):
    """One row per task id of the env's split; the prompt comes from the env's reset, in ``run``."""

    def load(self) -> Iterator[AgentGymTask]:
        from agentgym.plugins import get_env_spec

        c = self.config
        spec = get_env_spec(c.env)
        split = c.split or ("test" if "test" in spec.splits else next(iter(spec.splits), None))
        if split not in spec.splits:
            raise AgentGymError(f"{c.env} has no split {split!r} (it has {', '.join(spec.splits)})")
        ids = list(spec.splits[split].task_ids)[: c.num_tasks]
        for task_id in ids:
            data = AgentGymData(
                id=f"{c.env}/{split}/{task_id}",
                name=f"{c.env}#{task_id}",
                env=c.env,
                task_id=int(task_id),
                split=split,
                url=c.url,
                max_turns=c.max_turns or spec.default_max_turns,
                max_format_errors=c.max_format_errors,
                format_hint=c.format_hint,
                env_kwargs=c.env_kwargs,
            )
            yield AgentGymTask(data, c.task)


def _wire(message: Any) -> dict[str, Any]:
    from verifiers.v1.dialects.chat import message_to_wire

    return message if isinstance(message, dict) else message_to_wire(message)


class AgentGymHarness(vf.Harness[vf.HarnessConfig]):
    """A tool-less chat loop run in-process: each segment is one chat completion through the
    rollout's interception endpoint (verifiers applies the run's model and sampling there)."""

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_RESUME = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data, **_: Any):
        import httpx

        system, prompt = self.resolve_prompt(data)
        turns = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt or [])
        messages = ([{"role": "system", "content": system}] if system else []) + [_wire(m) for m in turns]
        body = {"model": ctx.model, "messages": messages}
        async with httpx.AsyncClient(timeout=None) as client:
            r = await client.post(
                f"{endpoint.rstrip('/')}/chat/completions",
                json=body,
                headers={"Authorization": f"Bearer {secret}"},
            )
        if r.status_code >= 400:
            return vf.ProgramResult(1, "", f"model call failed: HTTP {r.status_code}: {r.text[-2000:]}")
        return vf.ProgramResult(0, "", "")


class AgentGymEnvConfig(vf.EnvConfig):
    agent: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())
    """The one seat: the policy under evaluation/training (``--env.agent.*``). Its harness runs
    in this process and executes nothing, so the runtime is the local one, not a sandbox."""


class _Game:
    """One episode of our env, stepped as our rollout steps it (see the module docstring)."""

    def __init__(self, data: AgentGymData):
        from agentgym.plugins import get_env_spec
        from agentgym.trajectory import Episode

        self.data, self.spec = data, get_env_spec(data.env)
        self.env: Any = None
        self.episode = Episode(env=data.env, task_id=data.task_id, split=data.split, max_turns=data.max_turns)
        self.format_errors = 0

    async def open(self) -> list[dict[str, str]]:
        """Reset the env; the opening messages (system prompt, first observation)."""
        from agentgym.prompting import opening_messages

        d = self.data
        try:
            self.env = await asyncio.to_thread(open_env, d.env, url=d.url, **d.env_kwargs)
            obs, info = await asyncio.to_thread(self.env.reset, options={"task_id": d.task_id})
        except Exception as exc:  # noqa: BLE001 - any env failure is the episode's error
            raise EnvFailure(f"{d.env} task {d.task_id}: reset failed: {type(exc).__name__}: {exc}") from exc
        self.episode.category = info.get("category")
        return opening_messages(self.spec, info, obs, format_hint=d.format_hint)

    async def act(self, reply: str) -> str | None:
        """Take one reply: the next user turn, or None when the episode has ended."""
        from agentgym.parsers import get_parser
        from agentgym.prompting import format_error_observation, observation_turn
        from agentgym.trajectory import Step

        parsed = get_parser(self.spec.action_parser)(reply)
        step = Step(raw_output=reply, action=parsed.action)
        self.episode.steps.append(step)
        if parsed.action is None:
            self.format_errors += 1
            step.observation, step.info = format_error_observation(parsed.error), {"format_error": True}
            if self.data.max_format_errors and self.format_errors >= self.data.max_format_errors:
                return self.end("format_error")
            return self._next(step.observation)
        self.format_errors = 0
        try:
            obs, reward, terminated, truncated, info = await asyncio.to_thread(self.env.step, parsed.action)
        except Exception as exc:  # noqa: BLE001
            raise EnvFailure(f"{self.data.env} task {self.data.task_id}: step failed: {exc}") from exc
        step.observation, step.reward, step.info = obs, float(reward), info
        step.terminated, step.truncated = bool(terminated), bool(truncated)
        if step.terminated:
            return self.end(None)
        if step.truncated:
            return self.end("env_truncated")
        return self._next(observation_turn(self.spec.action_parser, obs, format_hint=self.data.format_hint))

    def _next(self, content: str) -> str | None:
        return self.end("max_turns") if len(self.episode.steps) >= self.data.max_turns else content

    def end(self, termination: str | None) -> None:
        self.episode.finish(termination)  # type: ignore[arg-type]

    @property
    def over(self) -> bool:
        return self.episode.termination is not None

    def close(self) -> None:
        if self.env is not None:
            self.env.close()


def _reply(segment: Any) -> str:
    """The segment's last assistant message, as sampled (``Segment.last_reply`` strips it)."""
    for message in reversed(segment.messages):
        if getattr(message, "role", None) == "assistant":
            return message.content or ""
    return ""


class AgentGymEnv(vf.Env[AgentGymEnvConfig]):
    """The env plays the user: each reply is parsed and stepped, each observation answers it."""

    async def run(self, task, agents) -> None:
        game = _Game(task.data)
        try:
            system, first = await game.open()
            opened = task.with_data(system_prompt=system["content"], prompt=first["content"])
            async with agents.agent.interaction(opened) as conversation:
                segment = await conversation.turn()
                while not segment.terminated:
                    nxt = await game.act(_reply(segment))
                    if nxt is None:
                        break
                    segment = await conversation.turn(nxt)
                ended_here = game.over
                if not ended_here:  # a verifiers-side limit ended the exchange: truncated
                    game.end("max_turns")
                trace = conversation.trace
                trace.info["agentgym"] = game.episode.model_dump(mode="json", by_alias=True)
                if ended_here:
                    term = game.episode.termination
                    trace.stop("terminated" if term in ("success", "failure") else str(term))
        finally:
            await asyncio.to_thread(game.close)


def load_environment(
    env: str = "babyai",
    *,
    url: str | None = None,
    split: str | None = None,
    num_tasks: int | None = None,
    max_turns: int | None = None,
    **kwargs: Any,
) -> Any:
    """A verifiers ``Env`` (:class:`AgentGymEnv`) over our env ``env``: in-process, or served at
    ``url``; the first ``num_tasks`` ids of ``split``; ``max_turns`` replies at most. ``kwargs``:
    the taskset's other fields (``max_format_errors``, ``format_hint``, ``env_kwargs``), and
    ``agent`` (a dict: the seat's verifiers ``AgentConfig``)."""
    agent = kwargs.pop("agent", None)
    taskset = {"id": TASKSET_ID, "env": env, "url": url, "split": split, "num_tasks": num_tasks}
    taskset |= {"max_turns": max_turns, **kwargs}
    config: dict[str, Any] = {"taskset": taskset}
    if agent is not None:
        config["agent"] = agent
    return vf.load_environment(vf.resolve_env_config(config))


__all__ = ["AgentGymEnv", "AgentGymHarness", "AgentGymTaskset", "load_environment"]


if __name__ == "__main__":
    from verifiers.v1.cli.eval.main import main

    main([TASKSET_ID, *sys.argv[1:]])
