"""The multi-turn rollout engine.

Up to ``batch_size`` episodes run at once (a finished one is replaced by the next task, so the
batch stays full), and no more of one env than its backend's ``max_live`` (the bound on env
instances): tasks beyond it wait, in order, for an instance to free up. Every turn makes one
batched generate call over the active episodes, parses each reply with the env's action parser,
and steps the envs of every backend concurrently. With a :class:`~agentgym_train.models.chat.ChatFormat`
each episode also keeps its token sequence: prompt ids, the exact sampled ids (loss mask 1,
logprobs kept), template and observation ids (loss mask 0). One episode's record: live.py.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from agentgym.errors import AgentGymError, lookup
from agentgym.parsers import ParseResult, get_parser, match_available
from agentgym.plugins import get_registry
from agentgym.prompting import format_error_observation, opening_messages
from agentgym.protocol import StepOutcome
from agentgym.spec import EnvSpec
from agentgym.trajectory import Episode, Message, Step, Tokens
from agentgym_train.models.chat import ChatFormat, TokenTrace
from agentgym_train.policies.base import Generation, Policy, Sampling, generate
from agentgym_train.rollout.envs import EnvBackend, Handle
from agentgym_train.rollout.live import LiveEpisode, Task


@dataclass
class RolloutStats:
    episodes: int = 0
    turns: int = 0
    generate_s: float = 0.0
    env_s: float = 0.0
    wall_s: float = 0.0
    sampled_tokens: int = 0
    by_termination: Counter[str] = field(default_factory=Counter)
    autoresets: int = 0  # episodes started in the request whose step ended the one before

    def add(self, other: RolloutStats) -> None:
        """Count ``other``'s rollout in too (a step's rollouts under dynamic sampling)."""
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


class RolloutEngine:
    """Runs episodes of ``policy`` on envs (see :mod:`agentgym_train.rollout.envs` for the backends).

    A policy with a ``chat`` format gets token sequences; without one episodes carry text only.
    ``max_context`` bounds an episode's whole token sequence and ``max_response`` what follows its
    opening prompt (verl pads the two to fixed widths): an episode that cannot fit another reply
    ends before generating (``max_turns``, ``context_full``).
    ``max_consecutive_format_errors`` ends an episode failing to act (``format_error``); 0 never does.
    ``episode_seed``: give every request its own random stream, seeded from this, the episode's
    place in the task list, env, task id, sample, seed and trial, and the turn (``Request.seed``):
    with a policy that honours it, an episode is the same whatever ran beside it (batch size, env
    instance bound). None: the policy's shared stream. A task's ``position`` is its place where
    that is not its index (verl plays one sample a call; a resumed evaluation plays the rest).
    ``match_actions``: a reply the env's parser cannot read is matched against the actions the env
    listed with its last observation (:func:`agentgym.parsers.match_available`); when it names
    exactly one, that action is stepped and the step's ``info["matched_action"]`` is True.
    ``format_hint``: the system prompt states the parser's reply format with an example, and each
    observation ends with a one-line reminder of it (see :mod:`agentgym.prompting`).
    ``constrain_actions``: where the env lists its actions, the reply is decoded constrained to
    them, each written in the parser's format (``Request.choices``; the ``hf`` policy does it).
    All are off by default: the env's prompt and parser alone decide what a reply means.
    """

    def __init__(
        self,
        policy: Policy,
        backends: Mapping[str, EnvBackend],
        *,
        sampling: Sampling | None = None,
        max_turns: int = 20,
        batch_size: int = 64,
        max_context: int | None = None,
        max_response: int | None = None,
        max_consecutive_format_errors: int = 3,
        on_episode: Callable[[Episode], None] | None = None,
        episode_seed: int | None = None,
        match_actions: bool = False,
        format_hint: bool = False,
        constrain_actions: bool = False,
    ):
        self.policy = policy
        self.backends = dict(backends)
        self.specs = {name: b.spec for name, b in self.backends.items()}
        self.chat: ChatFormat | None = policy.chat  # token-level: prompts and traces in its tokens
        self.sampling = sampling or Sampling()
        self.max_turns = max_turns
        self.batch_size = batch_size
        self.max_context = max_context
        self.max_response = max_response
        self.max_format_errors = max_consecutive_format_errors
        self.on_episode = on_episode
        self.episode_seed = episode_seed
        self.match_actions = match_actions
        self.format_hint = format_hint
        if constrain_actions and not policy.constrains:
            raise AgentGymError(
                f"constrain_actions needs a policy that can constrain its decoding (hf); {policy.name} cannot"
            )
        self.constrain_actions = constrain_actions
        self._hook = get_registry().pm.hook.agentgym_episode_end
        self.stats = RolloutStats()

    # -- public -------------------------------------------------------------------------------
    def run(self, tasks: Sequence[Task], *, close: bool = True) -> list[Episode]:
        """Run ``tasks`` to the end (and close the backends); episodes come back in task order."""

        async def main() -> list[Episode]:
            try:
                return await self.arun(tasks)
            finally:
                if close:
                    await self.aclose()

        return asyncio.run(main())

    async def aclose(self) -> None:
        await asyncio.gather(*(b.aclose() for b in self.backends.values()))

    async def arun(self, tasks: Sequence[Task]) -> list[Episode]:
        t0 = time.perf_counter()
        results: list[Episode | None] = [None] * len(tasks)
        pending = self._pending = list(enumerate(tasks))[::-1]
        live: list[tuple[int, LiveEpisode]] = []
        while pending or live:
            # the ended first: a task offered to an ended episode's autoreset is its, not admitted
            finished = [(i, x) for i, x in live if x.done]
            if finished:
                await self._close(finished, results)
                live = [(i, x) for i, x in live if not x.done] + self._autoreset(finished, pending)
                continue
            if pending and len(live) < self.batch_size:
                take = self._admit(pending, live)
                if take:
                    live += await self._open(take)
                    continue  # an episode that failed to open is finished at once
            await self._turn([x for _, x in live])
        self.stats.wall_s += time.perf_counter() - t0
        return [r for r in results if r is not None]

    # -- episode lifecycle --------------------------------------------------------------------
    def _admit(
        self, pending: list[tuple[int, Task]], live: list[tuple[int, LiveEpisode]]
    ) -> list[tuple[int, Task]]:
        """Take the next tasks (``pending`` is in reverse order) that fit in the batch and in their
        backend's instance bound; the others keep their places."""
        room = self.batch_size - len(live)
        open_per_env: dict[str, int] = {}
        for _, x in live:
            open_per_env[x.task.env] = open_per_env.get(x.task.env, 0) + 1
        take, wait = [], []
        while pending and len(take) < room:
            item = pending.pop()
            env = item[1].env
            backend = self.backends.get(env)  # an unknown env fails in ``_open``, naming the known ones
            limit = None if backend is None else backend.max_live
            assert limit is None or limit >= 1, f"{env}: a backend must hold at least one episode"
            if limit is not None and open_per_env.get(env, 0) >= limit:
                wait.append(item)
                continue
            open_per_env[env] = open_per_env.get(env, 0) + 1
            take.append(item)
        pending.extend(reversed(wait))
        return take

    async def _open(self, take: list[tuple[int, Task]]) -> list[tuple[int, LiveEpisode]]:
        by_env: dict[str, list[tuple[int, Task]]] = {}
        for i, t in take:
            lookup(self.backends, t.env, "env backend")
            by_env.setdefault(t.env, []).append((i, t))
        t0 = time.perf_counter()
        opened = await asyncio.gather(
            *(
                self.backends[e].open([t.task_id for _, t in items], [t.seed for _, t in items])
                for e, items in by_env.items()
            )
        )
        self.stats.env_s += time.perf_counter() - t0
        out = []
        for (env, items), handles in zip(by_env.items(), opened, strict=True):
            spec, backend = self.specs[env], self.backends[env]
            for (i, task), h in zip(items, handles, strict=True):
                out.append((i, self._start(i, task, spec, backend, h)))
        return out

    def _start(self, i: int, task: Task, spec: EnvSpec, backend: EnvBackend, h: Handle) -> LiveEpisode:
        """The ``i``-th task's episode, placed (its stream's seed) at ``i`` or at the task's own place."""
        episode = Episode(
            env=spec.name,
            task_id=task.task_id,
            split=task.split,
            category=h.info.get("category") if h.error is None else spec.category_of(task.task_id),
            policy=self.policy.name,
            seed=task.seed,
            max_turns=task.max_turns or self.max_turns,
            sample=task.sample,
            reflections=list(task.reflections),
        )
        x = LiveEpisode(task, spec, backend, h, episode, [], None, task.max_turns or self.max_turns)
        x.position = i if task.position is None else task.position
        if h.error is not None:
            x.end("error", h.error)
            return x
        x.actions = h.info.get("available_actions")
        x.messages = opening_messages(
            spec, h.info, h.observation, task.reflections, format_hint=self.format_hint
        )
        if self.chat is not None:
            x.trace = TokenTrace()
            x.trace.add_template(self.chat.start(x.messages))
        return x

    async def _close(self, finished: list[tuple[int, LiveEpisode]], results: list[Episode | None]) -> None:
        by_backend: dict[int, tuple[EnvBackend, list[Handle]]] = {}
        for _, x in finished:
            by_backend.setdefault(id(x.backend), (x.backend, []))[1].append(x.handle)
        await asyncio.gather(*(b.close(hs) for b, hs in by_backend.values()))
        for i, x in finished:
            ep = x.episode
            ep.messages = [Message(**m) for m in x.messages]
            if x.trace is not None and x.trace.ids:
                ep.tokens = Tokens(
                    ids=x.trace.ids,
                    loss_mask=x.trace.loss_mask,
                    logprobs=x.trace.logprobs,
                    reward_index=x.trace.last_sampled if x.trace.last_sampled >= 0 else None,
                )
                if x.trace.from_text:
                    ep.tokens_from_text = True
            results[i] = ep
            self.stats.episodes += 1
            term = ep.termination or "error"
            self.stats.by_termination[term] += 1
            self._hook(episode=ep)
            if self.on_episode is not None:
                self.on_episode(ep)

    # -- one turn -----------------------------------------------------------------------------
    async def _turn(self, live: list[LiveEpisode]) -> None:
        """One batched generate call over the episodes that can take another reply, then every
        backend's env steps concurrently."""
        active = self._with_room(live)
        if not active:
            return
        gens, t_gen = await self._generate(active)
        to_step: dict[int, tuple[EnvBackend, list[tuple[LiveEpisode, str]]]] = {}
        for x, g in zip(active, gens, strict=True):
            action = self._take_reply(x, g, t_gen)
            if action is not None:
                to_step.setdefault(id(x.backend), (x.backend, []))[1].append((x, action))
        t1 = time.perf_counter()
        await asyncio.gather(*(self._step_backend(b, items) for b, items in to_step.values()))
        self.stats.env_s += time.perf_counter() - t1
        self.stats.turns += len(active)

    def _with_room(self, live: list[LiveEpisode]) -> list[LiveEpisode]:
        """The episodes whose context can hold another reply; the others end here, before
        generating."""
        active = []
        for x in live:
            if x.trace is not None and not self._fits(x.trace):
                x.episode.context_full = True
                x.end("max_turns")
                continue
            active.append(x)
        return active

    def _fits(self, trace: TokenTrace) -> bool:
        """Whether another reply fits: the whole sequence within ``max_context``, what follows the
        opening prompt within ``max_response`` (verl pads prompt and response to fixed widths)."""
        need = self.sampling.max_new_tokens
        if self.max_context is not None and len(trace) + need > self.max_context:
            return False
        return self.max_response is None or len(trace) - trace.prompt_len + need <= self.max_response

    async def _generate(self, active: list[LiveEpisode]) -> tuple[list[Generation], float]:
        """The policy's replies, and the seconds they took."""
        t0 = time.perf_counter()
        requests = [x.request(self.episode_seed, self.constrain_actions) for x in active]
        try:
            gens = await generate(self.policy, requests, self.sampling)
        except Exception as exc:  # noqa: BLE001 - a failed batch ends its episodes, the run goes on
            gens = [
                Generation(text="", error=f"generation failed: {type(exc).__name__}: {exc}") for _ in active
            ]
        t_gen = time.perf_counter() - t0
        self.stats.generate_s += t_gen
        return gens, t_gen

    def _take_reply(self, x: LiveEpisode, g: Generation, t_gen: float) -> str | None:
        """Record a reply as the episode's next step: its parsed action for the env to step, or
        None when the episode ends or the reply did not parse (the parser's explanation is then
        the next observation)."""
        if g.error is not None:
            x.end("error", g.error)
            return None
        self.stats.sampled_tokens += x.record_generation(g, self.chat)
        parsed, matched = self._parse(x, g.text)
        step = Step(raw_output=g.text, action=parsed.action, timings={"generate": t_gen})
        if matched:
            step.info = {"matched_action": True}  # kept under the env's info when the step returns
        x.episode.steps.append(step)
        if parsed.action is None:
            x.format_errors += 1
            step.observation = format_error_observation(parsed.error)
            step.info = {"format_error": True}
            if self.max_format_errors and x.format_errors >= self.max_format_errors:
                x.end("format_error")
            else:
                x.after_step(step, self.chat, self.format_hint)
            return None
        x.format_errors = 0
        return parsed.action

    def _parse(self, x: LiveEpisode, text: str) -> tuple[ParseResult, bool]:
        """The reply's action by the env's parser; failing that, under ``match_actions``, the one
        available action the text names. True when the action was matched from free text."""
        parsed = get_parser(x.spec.action_parser)(text)
        if parsed.ok or not self.match_actions or not x.actions:
            return parsed, False
        matched = match_available(text, x.actions, x.spec.action_parser)
        return matched, matched.ok

    def _offer(self, backend: EnvBackend, items: list[tuple[LiveEpisode, str]]) -> list | None:
        """Where the backend autoresets: to each stepped episode, the next pending task of its env
        not offered to another, as the episode its session starts if this step ends the one it
        plays (``_autoreset``); ``then`` for ``backend.step``."""
        if not backend.autoresets:
            return None
        name = backend.spec.name
        offers = iter([p for p in reversed(self._pending) if p[1].env == name][: len(items)])
        then = []
        for x, _ in items:
            x.offered = next(offers, None)
            then.append(None if x.offered is None else (x.offered[1].task_id, x.offered[1].seed))
        return then

    def _autoreset(
        self, finished: list[tuple[int, LiveEpisode]], pending: list[tuple[int, Task]]
    ) -> list[tuple[int, LiveEpisode]]:
        """The episodes started by autoresets of the steps that ended ``finished`` (their tasks
        taken out of ``pending``)."""
        started = []
        for _, x in finished:
            h, offered = x.handle.next, x.offered
            if h is None or offered is None:
                continue
            pending.remove(offered)
            started.append((offered[0], self._start(*offered, x.spec, x.backend, h)))
            self.stats.autoresets += 1
        return started

    async def _step_backend(self, backend: EnvBackend, items: list[tuple[LiveEpisode, str]]) -> None:
        t = time.perf_counter()
        pairs, then = [(x.handle, a) for x, a in items], self._offer(backend, items)
        outcomes = await (backend.step(pairs) if then is None else backend.step(pairs, then))
        dt = time.perf_counter() - t
        for (x, _), o in zip(items, outcomes, strict=True):
            self._apply_outcome(x, o, dt)

    def _apply_outcome(self, x: LiveEpisode, o: StepOutcome, dt: float) -> None:
        step = x.episode.steps[-1]
        step.timings["env"] = dt
        if o.error is not None:
            x.end("error", o.error)
            return
        step.observation, step.reward = o.observation, o.reward
        step.terminated, step.truncated = o.terminated, o.truncated
        step.info = {**o.info, **step.info} if step.info else o.info
        x.actions = o.info.get("available_actions")
        x.after_step(step, self.chat, self.format_hint)


def rollout_metrics(episodes: list[Episode]) -> dict[str, Any]:
    """A step's rollout figures, the same for every training backend: means over the episodes that
    ran to an end; env failures are counted, never scored."""
    scored = [ep for ep in episodes if ep.termination != "error"]
    n = max(len(scored), 1)
    return {
        "return": sum(ep.return_ for ep in scored) / n,
        "success": sum(ep.success for ep in scored) / n,
        "turns": sum(ep.num_turns for ep in scored) / n,
        "truncation_rate": sum(ep.termination == "max_turns" for ep in scored) / n,
        "format_errors": sum(ep.termination == "format_error" for ep in scored) / n,
        #: turns per episode whose action the env rejected or the parser could not read
        "invalid_actions": sum(sum(not s.valid_action for s in ep.steps) for ep in scored) / n,
        "env_errors": len(episodes) - len(scored),
    }
