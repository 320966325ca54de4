"""The plugin module the entry point names: the ``agentgym_algorithms`` hook.

``agentgym plugins`` calls every hook of every plugin, so this module stays cheap to import:
``AlgorithmSpec`` is torch-free, and the estimator is named as ``"module:function"``, imported the
first time a run uses the algorithm.
"""

from __future__ import annotations

from agentgym_train.rl.specs import AlgorithmSpec

from agentgym import hookimpl

AGENTGYM_API_VERSION = "1"


@hookimpl
def agentgym_algorithms() -> list[AlgorithmSpec]:
    return [
        AlgorithmSpec(
            name="drgrpo",
            estimate="agentgym_drgrpo.estimator:drgrpo",
            needs_groups=True,  # it compares the samples of one task: a run needs n >= 2
            description="Dr. GRPO: each sample's score minus its group's mean, not divided by the std",
        )
    ]
