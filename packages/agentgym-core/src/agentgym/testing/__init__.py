"""Testing kit for env packages: the conformance suite and helpers (``pip install
agentgym-core[testing]``; its options are tabled in docs/env-contract.md).

Enable the suite for your env with one line in your tests' ``conftest.py``::

    agentgym_conformance = "guess"

or, with options, a dict literal::

    agentgym_conformance = {"env": "babyai", "sample": 8, "expert_sample": 20, "expert_min_success": 0.95}

The pytest plugin (entry point ``pytest11``, installed with ``agentgym-core``) finds that line and
collects the suite as tests of that conftest (``pytest -k conformance`` selects them): reset
determinism per task id, different ids giving different tasks, invalid and empty actions answered
with an observation, space checks (Gymnasium's ``check_env``), the env served over HTTP behaving
exactly like in-process, the expert solving a sample of tasks, every return (the expert's, random
and fuzzed episodes') within the spec's ``reward_range``, nothing of a played episode carried over
into the next reset, the same tasks in a second process with another ``PYTHONHASHSEED``, and task
ids outside the declared ones refused.
"""

from agentgym.server.background import free_port, serve_in_process, serve_in_thread
from agentgym.testing.conformance import ConformanceConfig, build_suite, run_actions, run_expert

__all__ = [
    "ConformanceConfig",
    "build_suite",
    "free_port",
    "run_actions",
    "run_expert",
    "serve_in_process",
    "serve_in_thread",
]
