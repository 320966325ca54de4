"""One episode in play: the task it runs (:class:`Task`) and what the rollout engine keeps of it
between turns (:class:`LiveEpisode`): its messages and token trace, its env handle, how it ends.

The engine (rollout.py) schedules episodes, calls the policy and the envs; what a turn does to one
episode's record is here: the request it makes, the reply it records, the observation it appends.
"""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass, field

from agentgym.parsers import format_action
from agentgym.prompting import observation_turn
from agentgym.spec import EnvSpec
from agentgym.trajectory import Episode, Step
from agentgym_train.models.chat import ChatFormat, TokenTrace
from agentgym_train.policies.base import Generation, Request
from agentgym_train.rollout.envs import EnvBackend, Handle


@dataclass
class Task:
    """One episode to run: an env's task id, which of its n samples this is, earlier reflections."""

    env: str
    task_id: int
    sample: int = 0
    split: str | None = None
    seed: int | None = None
    reflections: tuple[str, ...] = ()
    max_turns: int | None = None  # overrides the engine's horizon for this task
    # its place in the task list where that is not its index, so that it samples from the stream it
    # has there (RolloutEngine): the rest of a resumed evaluation, verl's one sample a call
    position: int | None = None


@dataclass
class LiveEpisode:
    task: Task
    spec: EnvSpec
    backend: EnvBackend
    handle: Handle
    episode: Episode
    messages: list[dict[str, str]]
    trace: TokenTrace | None
    max_turns: int
    format_errors: int = 0
    #: the actions the env listed with its last observation (``info["available_actions"]``), if any
    actions: list[str] | None = None
    position: int = 0  # the task's index in the run's task list (two draws of one task differ)
    stopped: bool = True  # the last reply ended on the end-of-turn token (not the token limit)
    done: bool = False
    #: the pending ``(position, task)`` its session starts if this turn's step ends the episode
    offered: tuple[int, Task] | None = None
    # unique in the process, so a policy's per-episode state (KV cache) never serves another episode
    key: int = field(default_factory=itertools.count().__next__)

    def end(self, termination: str | None = None, error: str | None = None) -> None:
        if error is not None:
            self.episode.error = error
        self.episode.finish(termination)  # type: ignore[arg-type]
        self.done = True

    def request(self, episode_seed: int | None, constrain_actions: bool) -> Request:
        """The policy request for its next reply (``RolloutEngine``'s ``episode_seed`` and
        ``constrain_actions`` say how it is seeded and constrained)."""
        backend, handle = self.backend, self.handle

        async def expert() -> str:
            return await backend.expert(handle)

        turn = len(self.episode.steps)
        seed = None
        if episode_seed is not None:
            t = self.task
            name = (
                f"{episode_seed}/{self.position}/{t.env}/{t.task_id}/{t.sample}/{t.seed}/"
                f"{len(t.reflections)}/{turn}"
            )
            seed = int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big") >> 1
        return Request(
            messages=list(self.messages),
            prompt_ids=list(self.trace.ids) if self.trace is not None else None,
            expert=expert,
            action_format=self.spec.action_parser,
            cache_key=self.key,
            seed=seed,
            choices=[format_action(self.spec.action_parser, a) for a in self.actions]
            if constrain_actions and self.actions
            else None,
            meta={
                "env": self.spec.name,
                "task_id": self.task.task_id,
                "sample": self.task.sample,
                "turn": turn,
            },
        )

    def record_generation(self, g: Generation, chat: ChatFormat | None) -> int:
        """The reply as the next assistant message (and its sampled ids in the trace); how many
        tokens were sampled."""
        self.messages.append({"role": "assistant", "content": g.text})
        if self.trace is None or chat is None:
            return 0
        ids = g.token_ids
        if ids is None:  # a text-only backend: the best we can do is encode its text
            ids = chat.encode(g.text) + ([chat.eot_id] if g.stopped else [])
            self.trace.from_text = True
        self.trace.add_sampled(ids, g.logprobs)
        self.stopped = g.stopped
        return len(ids)

    def after_step(self, step: Step, chat: ChatFormat | None, format_hint: bool) -> None:
        """Append the observation as the next user turn, or end the episode."""
        if step.terminated:
            self.end()
        elif step.truncated:
            self.end("env_truncated")
        elif len(self.episode.steps) >= self.max_turns:
            self.end("max_turns")
        if self.done:
            return
        content = step.observation
        if step.action is not None:
            content = observation_turn(self.spec.action_parser, content, format_hint=format_hint)
        self.messages.append({"role": "user", "content": content})
        if self.trace is not None and chat is not None:
            self.trace.add_template(chat.continuation(self.messages, self.stopped))
