"""``agentgym train --backend verl``: the same envs, agent loop, algorithms and horizon schedules
on verl's PPO trainer (Ray; FSDP; vLLM, SGLang or our ``agentgym_hf`` rollout).

Modules: :mod:`.translate` (our config to verl's), :mod:`.launch` (data files, the command,
running it), :mod:`.agent_loop` (our rollout engine as a verl agent loop), :mod:`.keeper` (horizon
schedule, episodes and metrics across agent loops), :mod:`.hooks` (verl's sampler and checkpoint
hooks), :mod:`.estimators` (plugin algorithms in verl's registry), :mod:`.hf_rollout` (a rollout
backend on our ``hf`` policy) and :mod:`.cpu` (verl on CPU: platform and patches), all tied in by
:mod:`.external`, the module verl imports in every process.
"""
