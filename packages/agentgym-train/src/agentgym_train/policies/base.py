"""What every policy backend takes and returns.

A policy is any object with ``generate(requests, sampling) -> list[Generation]``: one batched call
per turn over the active episodes. Token-level backends (``hf``, ``vllm``) read
``Request.prompt_ids`` and return the exact sampled ids and their logprobs; text-level backends
(``openai``) read ``Request.messages``; the ``scripted`` backend asks the episode's env for its
expert's action through ``Request.expert``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


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
    name: str

    def generate(self, requests: Sequence[Request], sampling: Sampling) -> list[Generation]: ...


class AsyncPolicy(Protocol):
    """A policy whose generation is a coroutine (network backends, the scripted expert)."""

    name: str

    async def agenerate(self, requests: Sequence[Request], sampling: Sampling) -> list[Generation]: ...


async def generate(
    policy: Policy | AsyncPolicy, requests: Sequence[Request], sampling: Sampling
) -> list[Generation]:
    """Run one batched generate call on any policy, sync (in a thread) or async."""
    import asyncio

    if not requests:
        return []
    if hasattr(policy, "agenerate"):
        out = await policy.agenerate(requests, sampling)
    else:
        out = await asyncio.to_thread(policy.generate, requests, sampling)
    if len(out) != len(requests):
        raise RuntimeError(
            f"policy {policy.name!r} returned {len(out)} generations for {len(requests)} requests"
        )
    return list(out)
