"""Retrying a request and replaying a lost session, written once, sans I/O, for the sync and async clients.

Each is a *plan*: a generator that yields what to do next and is sent back what came of it, and
that returns its result or raises. The clients drive plans with :func:`run` (sync) or :func:`arun`
(async), doing the I/O themselves: the policy is the same on both sides by construction.

:func:`retrying` retries transport failures and 502/503/504 with exponential backoff (or the
server's ``Retry-After``), resending a POST only when it never reached the server.

:func:`replaying` re-creates the state of a session the server lost (restart, idle expiry, crashed
worker) by replaying its actions on a fresh session: envs are deterministic per task id (the
conformance kit checks it), so the replayed session is in the same state, and the replay's last
observation must equal the one the episode last saw (:func:`check_replay`). A session that cannot
be restored, or whose replay ends elsewhere, is marked failed so that the rollout can mark its
episode ``termination="error"`` and leave it out of training instead of scoring it as a failure or
training on a state the model never saw.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

from agentgym.errors import AgentGymError, ServerUnavailableError

T = TypeVar("T")
#: A sans-I/O plan: yields commands, is sent each command's result, returns its own result.
Plan = Generator[Any, Any, T]

_RETRY_STATUS = {502, 503, 504}
#: Errors the server declares about the env itself (its session is closed): never resent, even
#: with a retryable status (a step that hung past the server's step timeout answers 504).
_FINAL_CODES = {"step_timeout"}


class _Send:
    def __repr__(self) -> str:
        return "SEND"


#: Command of :func:`retrying`: make the request (again); send back its response or transport error.
SEND = _Send()


@dataclass(frozen=True, slots=True)
class Sleep:
    """Command of :func:`retrying`: wait this long, then go on (send back nothing)."""

    seconds: float


def retryable(response: httpx.Response) -> bool:
    """A 502/503/504 is worth resending, unless the server says the env itself failed."""
    if response.status_code not in _RETRY_STATUS:
        return False
    try:
        return response.json()["error"]["code"] not in _FINAL_CODES
    except (ValueError, KeyError, TypeError):
        return True


def retry_delay(response: httpx.Response | None, backoff: float, attempt: int) -> float:
    """Exponential backoff, or the server's ``Retry-After`` when it asks for longer (capped at 30 s)."""
    delay = backoff * 2**attempt
    if response is not None:
        try:
            delay = max(delay, min(30.0, float(response.headers.get("retry-after", 0))))
        except ValueError:
            pass
    return delay


def safe_to_retry(method: str, exc: httpx.TransportError) -> bool:
    """A POST (create, step, reset) is resent only if it never reached the server: after a read
    timeout the step may have been applied, and applying it twice would corrupt the episode.
    Callers restore such a session by replay on a fresh one instead."""
    return method != "POST" or isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout))


def retrying(method: str, where: str, retries: int, backoff: float) -> Plan[httpx.Response]:
    """The retry policy for one request to ``where``: returns the response to keep (good, an error
    not worth resending, or the last try's), raises ``ServerUnavailableError`` when none came."""
    for attempt in range(retries + 1):
        outcome = yield SEND
        if isinstance(outcome, httpx.TransportError):
            if attempt == retries or not safe_to_retry(method, outcome):
                raise ServerUnavailableError(f"{where} unreachable: {outcome}") from outcome
            response = None
        else:
            if not retryable(outcome) or attempt == retries:
                return outcome
            response = outcome
        yield Sleep(retry_delay(response, backoff, attempt))
    raise AssertionError("unreachable")


def check_replay(observation: str, seen: str, n_actions: int) -> None:
    """A restored session must stand where the lost one stood: the replay's last observation is the
    one the episode last saw; else ``replay_diverged`` (the env is not deterministic there)."""
    if observation != seen:
        raise AgentGymError(
            f"replay after a lost session diverged: after {n_actions} action(s) the env showed another "
            f"observation than the episode saw ({observation[:80]!r} vs {seen[:80]!r}); the env is "
            "not deterministic for this task, so the episode cannot go on",
            code="replay_diverged",
        )


def replaying(actions: Sequence[str], seen: str, observation: str) -> Plan[None]:
    """Replay a lost session's ``actions`` on the fresh session (first showing ``observation``): yields
    each action to step, is sent back the step's result; raises ``replay_diverged`` if the replay
    does not end on ``seen``, the observation the episode last saw."""
    for action in actions:
        observation = (yield action)["observation"]
    check_replay(observation, seen, len(actions))


def run(plan: Plan[T], do: Callable[[Any], Any]) -> T:
    """Drive a plan synchronously: ``do`` carries out each command; its result is sent back."""
    result = None
    while True:
        try:
            command = plan.send(result)
        except StopIteration as done:
            return done.value
        result = do(command)


async def arun(plan: Plan[T], do: Callable[[Any], Awaitable[Any]]) -> T:
    """Drive a plan asynchronously: ``do`` carries out each command; its result is sent back."""
    result = None
    while True:
        try:
            command = plan.send(result)
        except StopIteration as done:
            return done.value
        result = await do(command)
