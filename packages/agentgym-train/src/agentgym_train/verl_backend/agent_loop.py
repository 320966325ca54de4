"""Our agent loop inside verl: ``AgentGymAgentLoop`` (registered as ``agentgym``) on verl's
``AgentLoopBase``.

One implementation, two drivers: a sample's episode is played by the same
:class:`~agentgym_train.rollout.engine.RolloutEngine` the native trainer uses (chat template, the
append-only check, the loss mask, format errors, turn cap, context limit, termination), over one
env backend shared by the worker's samples (in-process envs, or sessions on ``env_urls``
servers). Only the policy differs: :class:`ServerPolicy` sends each turn's token ids to verl's
server manager and takes back the sampled ids and log-probs. The episode becomes an
``AgentLoopOutput``: ``response_mask`` 1 exactly on sampled tokens, the score on the last sampled
token, our termination, success, env and category as extra fields, and so are each model turn's
span, anchor state and reward (for turn-level algorithms such as ``gigpo``: :mod:`.estimators`).
An episode whose env failed is recorded and then raised, so verl drops the sample instead of
scoring it 0.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Sequence
from typing import Any

from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput

from agentgym.errors import AgentGymError
from agentgym.plugins import get_env_spec
from agentgym.trajectory import Episode
from agentgym_train.models.chat import ChatFormat
from agentgym_train.policies.base import BasePolicy, Generation, Request, Sampling
from agentgym_train.rl.batch import episode_score, episode_turns
from agentgym_train.rollout.engine import RolloutEngine, Task
from agentgym_train.rollout.envs import EnvBackend, make_backend, read_env_token
from agentgym_train.verl_backend.estimators import turn_fields
from agentgym_train.verl_backend.keeper import get_keeper

NAME = "agentgym"
#: rollout servers that sample a request carrying ``seed`` from a stream of its own (vLLM's
#: ``SamplingParams.seed``, ours); SGLang's is not passed one
SEEDED = frozenset({"agentgym_hf", "vllm"})


class EpisodeFailed(AgentGymError, RuntimeError):
    """The episode could not be played to an end (its env failed): verl drops the sample."""


class ServerPolicy(BasePolicy):
    """An async policy over verl's ``LLMServerClient``: token ids in, sampled ids and log-probs out.
    Remembers the weight versions (verl's global steps) that served the episode."""

    name = "verl"

    def __init__(
        self, server_manager: Any, chat: ChatFormat, sampling_params: dict[str, Any], *, seeded: bool = True
    ):
        self.server_manager = server_manager
        self.chat = chat
        self.params = {k: v for k, v in sampling_params.items() if k not in ("max_tokens", "max_new_tokens")}
        self.seeded = seeded  # the server samples a request with a ``seed`` from its own stream
        self.request_id = uuid.uuid4().hex  # one per episode: its turns stick to one server
        self.global_steps: list[int] = []

    async def agenerate(self, requests: Sequence[Request], sampling: Sampling) -> list[Generation]:
        return list(await asyncio.gather(*(self._one(r, sampling) for r in requests)))

    async def _one(self, request: Request, sampling: Sampling) -> Generation:
        params = {
            **self.params,
            "max_tokens": sampling.max_new_tokens,
            "stop_token_ids": list(self.chat.stop_ids),
            "logprobs": True,
        }
        if self.seeded and request.seed is not None:
            params["seed"] = request.seed
        out = await self.server_manager.generate(
            self.request_id, prompt_ids=request.prompt_ids, sampling_params=params
        )
        step = out.extra_fields.get("global_steps")
        if step is not None:
            self.global_steps.append(int(step))
        ids = list(out.token_ids)
        stopped = bool(ids) and ids[-1] in self.chat.stop_ids
        text = self.chat.tokenizer.decode(ids[:-1] if stopped else ids, skip_special_tokens=False)
        logprobs = list(out.log_probs) if out.log_probs is not None else None
        return Generation(text=text, token_ids=ids, logprobs=logprobs, stopped=stopped)


class _Worker:
    """What one agent-loop worker process shares across its samples: the keeper's handle, the
    chat format, one env backend per env and a bound on the episodes open on it."""

    def __init__(self, settings: dict[str, Any], tokenizer: Any):
        self.settings = settings
        self.keeper = get_keeper(settings)
        self.chat = ChatFormat(tokenizer)
        self.backends: dict[str, EnvBackend] = {}
        self.slots: dict[str, asyncio.Semaphore] = {}

    def backend(self, env: str) -> tuple[EnvBackend, asyncio.Semaphore]:
        if env not in self.backends:
            s = self.settings
            backend = make_backend(
                get_env_spec(env),
                s.get("env_urls") or (),
                token=read_env_token(s.get("env_token_file")) if s.get("env_urls") else None,
                max_instances=s.get("max_instances"),
            )
            self.backends[env] = backend
            self.slots[env] = asyncio.Semaphore(backend.max_live or 1 << 30)
        return self.backends[env], self.slots[env]


_workers: dict[int, _Worker] = {}
_workers_lock = threading.Lock()  # the first batch's samples all ask at once, from threads


class AgentGymAgentLoop(AgentLoopBase):
    """Plays one task of an AgentGym env (the dataset row's ``env`` and ``task_id``) with the
    policy being trained; see the module docstring."""

    def _worker(self) -> _Worker:
        key = id(self.config)
        with _workers_lock:
            if key not in _workers:
                settings = OmegaConf.to_container(self.config.agentgym, resolve=True)
                _workers[key] = _Worker(settings, self.tokenizer)
            return _workers[key]

    async def run(self, sampling_params: dict[str, Any], **row: Any) -> AgentLoopOutput:
        worker = await asyncio.to_thread(self._worker)
        s = worker.settings
        step, phase = int(row.get("global_steps", 0) or 0), str(row.get("phase", "train"))
        horizon = await worker.keeper.horizon.remote(step, phase, str(row["env"]))
        backend, slot = worker.backend(str(row["env"]))
        policy = ServerPolicy(
            self.server_manager, worker.chat, sampling_params, seeded=self.rollout_config.name in SEEDED
        )
        # the episode's place in the native rollout's task list (a step's draws, or an env's
        # validation tasks, each task's n samples side by side): the row's place (launch.task_rows)
        # and the sample, verl's session
        k = int(row.get("session_id", 0) or 0)
        n = int(self.rollout_config.n if phase == "train" else self.rollout_config.val_kwargs.n)
        position = int(row.get("position", 0) or 0) * n + k
        base = s.get("episode_seed")
        engine = RolloutEngine(
            policy,
            {str(row["env"]): backend},
            sampling=Sampling(max_new_tokens=int(s["max_new_tokens"])),
            max_turns=int(horizon),
            batch_size=1,
            max_context=self.rollout_config.prompt_length + self.rollout_config.response_length,
            max_response=self.rollout_config.response_length,
            match_actions=bool(s.get("match_actions", False)),
            format_hint=bool(s.get("format_hint", False)),
            episode_seed=None if base is None else (base + step if phase == "train" else base - 1 - step),
        )
        task = Task(str(row["env"]), int(row["task_id"]), sample=k, split=row.get("split"), position=position)
        async with slot:
            (episode,) = await engine.arun([task])
        episode.group = int(row.get("index", 0) or 0)
        problem = self._unusable(episode)
        if problem:
            episode.error = episode.error or problem
            episode.termination = "error"
        await worker.keeper.record.remote(step, phase, episode)
        if problem:
            raise EpisodeFailed(f"{episode.env} task {episode.task_id}: {problem}")
        return self._output(episode, policy, horizon, step)

    def _unusable(self, ep: Episode) -> str | None:
        """Why an episode cannot be trained on (None when it can)."""
        if ep.termination == "error":
            return ep.error or "the episode ended in an error"
        if ep.tokens is None or ep.tokens.reward_index is None:
            return "no token was sampled"
        prompt = ep.tokens.loss_mask.index(1)
        if prompt > self.rollout_config.prompt_length:
            return (
                f"the opening prompt has {prompt} tokens, more than data.max_prompt_length="
                f"{self.rollout_config.prompt_length} (raise it under verl: in the config)"
            )
        return None

    def _output(self, ep: Episode, policy: ServerPolicy, horizon: int, step: int) -> AgentLoopOutput:
        s = self._worker().settings
        tokens = ep.tokens
        assert tokens is not None and tokens.reward_index is not None
        # the response runs from the first sampled token to the last: verl puts the score on the
        # response's last token, and a trailing observation is never trained on
        cut, end = tokens.loss_mask.index(1), tokens.reward_index + 1
        steps = policy.global_steps or [step]
        score = episode_score(ep, s["reward"], s.get("reward_params"))
        # every turn lies within the response (its first sampled token to its last)
        turns = turn_fields(episode_turns(ep, s["reward"], score, s.get("reward_params")), offset=cut)
        return AgentLoopOutput(
            prompt_ids=tokens.ids[:cut],
            response_ids=tokens.ids[cut:end],
            response_mask=tokens.loss_mask[cut:end],
            response_logprobs=tokens.logprobs[cut:end],
            reward_score=score,
            num_turns=len(ep.messages),
            metrics=AgentLoopMetrics(),
            extra_fields={
                "global_steps": steps[-1],
                "min_global_steps": min(steps),
                "max_global_steps": max(steps),
                "agentgym_env": ep.env,
                "agentgym_category": ep.category,
                "agentgym_termination": ep.termination,
                "agentgym_success": bool(ep.success),
                "agentgym_turns": ep.num_turns,
                "agentgym_horizon": int(horizon),
                "reward_extra_info": {"acc": float(ep.success), "turns": float(ep.num_turns)},
                **turns,
            },
        )
