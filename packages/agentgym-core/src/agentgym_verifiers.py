"""verifiers' id for our envs: ``vf-eval agentgym_verifiers --env.taskset.env babyai ...``.

verifiers 0.4 resolves a taskset id by importing the top-level module of that name (no entry
points): this module, shipped with agentgym-core, is :mod:`agentgym.adapters.verifiers` under
that name, so the id loads in any process (``vf-eval``, an env-server worker) with nothing
imported first. It needs the extra: ``pip install agentgym-core[verifiers]``.
"""

import sys

from agentgym.adapters import verifiers as _adapter

# one module under both names: the id's classes are the adapter's own
sys.modules[__name__] = _adapter
