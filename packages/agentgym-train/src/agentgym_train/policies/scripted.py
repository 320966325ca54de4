"""``scripted``: the env's expert, speaking through the same text actions a model would."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from agentgym.parsers import format_action
from agentgym_train.policies.base import BasePolicy, Generation, Request, Sampling


class ScriptedPolicy(BasePolicy):
    """Asks each episode's env for its expert's next action (in-process, or the server's
    ``/v1/sessions/{id}/expert``) and writes it in the env's action format. For tests, data
    collection (demonstrations for SFT) and as the upper bar in evaluation."""

    name = "scripted"

    def __init__(self, **_: Any):
        pass

    async def agenerate(self, requests: Sequence[Request], sampling: Sampling) -> list[Generation]:
        async def one(r: Request) -> Generation:
            if r.expert is None:
                return Generation("", error="the scripted policy needs an env expert (none was attached)")
            try:
                action = await r.expert()
            except Exception as exc:  # noqa: BLE001 - an expert failure ends its episode only
                return Generation("", error=f"expert failed: {type(exc).__name__}: {exc}")
            return Generation(format_action(r.action_format, action))

        return list(await asyncio.gather(*(one(r) for r in requests)))
