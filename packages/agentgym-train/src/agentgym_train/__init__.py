"""AgentGym training: policies, multi-turn rollout with token masks, evaluation."""

from __future__ import annotations

__version__ = "0.1.0"
