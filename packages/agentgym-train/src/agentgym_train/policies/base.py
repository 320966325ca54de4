"""What every policy backend takes and returns.

A policy (:class:`Policy`; :class:`BasePolicy` gives the defaults) makes one batched call per turn
over the active episodes, ``agenerate(requests, sampling) -> list[Generation]``. Token-level
backends (``hf``, ``vllm``) read ``Request.prompt_ids`` and return the exact sampled ids and their
logprobs; text-level backends (``openai``) read ``Request.messages``; the ``scripted`` backend asks
the episode's env for its expert's action through ``Request.expert``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from agentgym.errors import AgentGymError

if TYPE_CHECKING:
    from agentgym_train.models.chat import ChatFormat


@dataclass(frozen=True)
class Sampling:
    """Sampling parameters for one turn (the same for every request of a call)."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 256
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0


@dataclass
class Request:
    """One episode's turn: the conversation so far, and its token ids when a tokenizer is in use."""

    messages: list[dict[str, str]]
    prompt_ids: list[int] | None = None
    #: Async callable giving the env expert's next action (set by the rollout; used by ``scripted``).
    expert: Callable[[], Awaitable[str]] | None = None
    #: The action format the env expects (its parser name: react, tags, fenced, plain).
    action_format: str = "react"
    meta: dict[str, Any] = field(default_factory=dict)
    #: The same value on every turn of one episode and on no other episode's (the rollout engine
    #: sets it): a backend may keep the episode's state under it between calls, such as the ``hf``
    #: backend's KV cache. None: nothing is kept.
    cache_key: Hashable | None = None
    #: This request's own random stream (the rollout engine sets it from the run's seed and the
    #: episode's env, task, sample and turn): a backend that honours it samples the reply from a
    #: generator seeded with it, so the reply does not depend on which other episodes share the
    #: call (the batch size, the env instance bound). None: the backend's shared stream.
    seed: int | None = None
    #: The replies the backend must choose among, token by token (constrained decoding; the
    #: rollout's ``constrain_actions``: the env's available actions in its parser's format). None:
    #: a free reply. Only a backend whose ``constrains`` is True honours it.
    choices: list[str] | None = None


@dataclass
class Generation:
    """What a policy produced for one request.

    ``token_ids`` are the sampled ids, including the end-of-turn token when generation stopped on
    it (``stopped`` True) and excluding any padding; ``logprobs`` has one entry per id (the model's
    log-probability of the sampled token), or is None when the backend cannot give them.
    """

    text: str
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    stopped: bool = True
    #: Set when the backend failed for this request only (the episode ends as an agent-side error).
    error: str | None = None


@runtime_checkable
class Policy(Protocol):
    """Everything the rollout engine, the evaluator, the trainer and the recipes use of a policy
    backend. :class:`BasePolicy` gives every member but ``generate`` a default."""

    #: Written into each episode (``Episode.policy``) and into error messages.
    name: str
    #: The chat format a token-level backend tokenizes with: the engine builds ``Request.prompt_ids``
    #: and the episode's token trace in it. None: a text-level backend (messages in, text out).
    chat: ChatFormat | None
    #: Whether it honours ``Request.choices`` (constrained decoding, ``constrain_actions``).
    constrains: bool

    async def agenerate(self, requests: Sequence[Request], sampling: Sampling) -> list[Generation]:
        """One generation per request, in order: the engine's one call per turn."""
        ...

    def sync_from(self, model: Any) -> None:
        """Take a trained model's current weights (an engine of its own, as vLLM colocated with
        the trainer); a backend that samples from the trained model itself has nothing to do."""
        ...

    def close(self) -> None:
        """Give back what the backend holds (an engine's weights and KV cache) now."""
        ...


#: The members a policy must have (:class:`Policy`), named in the error for one that lacks some.
POLICY_MEMBERS = ("name", "chat", "constrains", "agenerate", "sync_from", "close")


class BasePolicy:
    """The defaults of :class:`Policy`: a text-level backend that constrains nothing, holds
    nothing and takes no weights. A subclass implements ``generate`` (blocking: the engine runs it
    in a thread) or ``agenerate`` (a coroutine, for network backends), and overrides what differs."""

    name = "policy"
    chat: ChatFormat | None = None
    constrains = False

    def generate(self, requests: Sequence[Request], sampling: Sampling) -> list[Generation]:
        raise NotImplementedError(f"{type(self).__name__} implements neither generate nor agenerate")

    async def agenerate(self, requests: Sequence[Request], sampling: Sampling) -> list[Generation]:
        return await asyncio.to_thread(self.generate, requests, sampling)

    def sync_from(self, model: Any) -> None:
        return None

    def close(self) -> None:
        return None


def check_policy(policy: object, origin: str) -> Policy:
    """``policy`` if it has every member of :class:`Policy`, else a one-line error naming the
    missing ones (a plugin's factory written against an older interface fails here, not mid-run)."""

    missing = [m for m in POLICY_MEMBERS if m not in dir(policy)]
    if missing:
        raise AgentGymError(
            f"{origin} returned {type(policy).__name__}, which lacks {', '.join(missing)}: a policy "
            "subclasses agentgym_train.policies.BasePolicy or has every member of Policy"
        )
    return policy  # type: ignore[return-value]


async def generate(policy: Policy, requests: Sequence[Request], sampling: Sampling) -> list[Generation]:
    """Run one batched generate call on a policy; a reply count that differs from the requests' is
    the backend's bug, reported as such."""
    if not requests:
        return []
    out = await policy.agenerate(requests, sampling)
    if len(out) != len(requests):
        raise RuntimeError(
            f"policy {policy.name!r} returned {len(out)} generations for {len(requests)} requests"
        )
    return list(out)
