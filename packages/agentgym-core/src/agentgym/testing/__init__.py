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

``import_or_skip(module)`` is ``pytest.importorskip`` for tests of an optional library that fails
instead where the test environment declares the library required (``AGENTGYM_TEST_REQUIRES``).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

from agentgym.server.background import free_port, serve_in_process, serve_in_thread
from agentgym.testing.conformance import ConformanceConfig, build_suite, run_actions, run_expert

#: The modules that must import where the tests run, comma-separated: set by the hatch environments
#: that exist for them (``interop``, ``vllm``, ``verl``; hatch.toml), unset elsewhere.
REQUIRES_VAR = "AGENTGYM_TEST_REQUIRES"


def required_modules() -> set[str]:
    """The modules :data:`REQUIRES_VAR` names."""
    return {m.strip() for m in os.environ.get(REQUIRES_VAR, "").split(",") if m.strip()}


def import_or_skip(module: str, reason: str | None = None) -> ModuleType:
    """``pytest.importorskip`` that fails instead where the module is required: ``module``
    imported; where :data:`REQUIRES_VAR` names it or a package above it (the environment exists
    for it), an import failure fails the test or module, with the error; elsewhere it skips."""
    import pytest

    __tracebackhide__ = True  # reported at the caller, as pytest.importorskip is
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        error = f"{type(exc).__name__}: {exc}"
    parts = module.split(".")
    required = required_modules() & {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
    if required:
        pytest.fail(
            f"{module} does not import, and this environment requires {', '.join(sorted(required))} "
            f"({REQUIRES_VAR}={os.environ[REQUIRES_VAR]}): {error}",
            pytrace=False,
        )
    pytest.skip(reason or f"could not import {module!r}: {error}", allow_module_level=True)


__all__ = [
    "REQUIRES_VAR",
    "ConformanceConfig",
    "build_suite",
    "free_port",
    "import_or_skip",
    "required_modules",
    "run_actions",
    "run_expert",
    "serve_in_process",
    "serve_in_thread",
]
