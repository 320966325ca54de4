"""What crosses a shard's boundary (from the event loop to a pool thread, or pickled to a worker
process): the operation a shard runs on its ``EnvHost`` (:class:`Op`), a batch's items
(:class:`StepItem`, :class:`ResetItem`) and each item's answer (:class:`Answer`).

Items are named tuples: typed fields for the reader, and a tuple's cost where it counts (built per
step from each request, pickled per batch to a worker).
"""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple, TypedDict


class Op(StrEnum):
    """An ``EnvHost`` operation a shard runs (``EnvHost.ops`` maps each to its method)."""

    CREATE = "create"
    RESET = "reset"
    CLOSE = "close"
    DROP_IDLE = "drop_idle"
    STEP_MANY = "step_many"
    RESET_MANY = "reset_many"
    OBSERVATION = "observation"
    EXPERT_ACTION = "expert_action"
    RENDER_PNG = "render_png"


class ResetTo(NamedTuple):
    """Where an autoreset takes the session: ``task_id`` and ``seed`` (None: the env's choice), or,
    with ``next_task``, the next of the task ids the session was created with."""

    task_id: int | None = None
    seed: int | None = None
    next_task: bool = False


#: ``"autoreset": true``: the next of the session's own tasks
NEXT_TASK = ResetTo(next_task=True)


class StepItem(NamedTuple):
    """One step of a batch (a single step is a batch of one)."""

    sid: int
    action: str
    #: reset the session at once if this step ends its episode (the new episode's start comes back
    #: under ``"reset"``); None: no reset
    autoreset: ResetTo | None = None
    #: answered as the env's original AgentGym server did (compat.py's routes)
    compat: bool = False


class ResetItem(NamedTuple):
    """One reset of a batch (``POST /v1/reset``)."""

    sid: int
    task_id: int | None = None
    seed: int | None = None


class Answer(TypedDict, total=False):
    """One item's answer: ``json``, its result already encoded (encoding.py), or ``error``
    (``{"code", "message"}``) and its HTTP ``status`` (``protocol.item_error``)."""

    json: bytes
    error: dict[str, str]
    status: int
