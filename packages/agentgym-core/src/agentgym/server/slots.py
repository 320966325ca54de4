"""What an ``EnvHost`` keeps per session (:class:`Slot`) and what its batched steps pass around: a
step that ended its episode waiting for its autoreset (:class:`Ended`), and how each item's call is
made (:data:`Guard`)."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentgym.env import TextEnv
from agentgym.server.messages import ResetTo
from agentgym.spec import EnvSpec


@dataclass
class Slot:
    spec: EnvSpec
    env: TextEnv
    lock: threading.Lock = field(default_factory=threading.Lock)
    expert: Any = None
    info: dict[str, Any] = field(default_factory=dict)
    done: bool = False
    abandoned: bool = False  # its step hung past the timeout; the session is gone
    closed: bool = False  # its env was closed after it was abandoned
    tasks: deque[int] = field(default_factory=deque)  # what an autoreset of ``True`` resets to


@dataclass
class Ended:
    """A step that ended its episode and asked for an autoreset, its session's lock still held."""

    sid: int
    slot: Slot
    autoreset: ResetTo
    json: bytes  # the step's result, encoded before the reset can change anything it holds


#: ``(host, session, call, arg) -> call(arg)``, or the item's answer when the call could not end
#: (the host an ``EnvHost``: named ``Any`` here, which the host module imports)
Guard = Callable[[Any, int, Callable[[Any], Any], Any], Any]


def plain_call(host: Any, sid: int, call: Callable[[Any], Any], arg: Any) -> Any:
    """The default :data:`Guard`: the call, unwatched."""
    return call(arg)
