"""What verl imports in every process of an agentgym run (``VERL_USE_EXTERNAL_MODULES``, read in
``verl/__init__.py``; Ray hands the variable to its workers): checks the verl version, installs
the CPU platform and patches when ``VERL_PLATFORM=cpu``, and registers the ``agentgym_hf``
rollout and our plugin algorithms. The agent loop itself is registered through verl's agent-loop
config file (``rollout.agent.agent_loop_config_path``)."""

import verl  # noqa: F401 - first: without verl this module fails to import by that name

from agentgym_train.verl_backend import cpu, estimators, hf_rollout

cpu.check_verl_version()
if cpu.on_cpu():
    cpu.install()
hf_rollout.register()
estimators.register()
