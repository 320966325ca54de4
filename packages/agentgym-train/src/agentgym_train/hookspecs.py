"""Specs of the train package's own hooks: RL algorithms, policy backends, horizon schedules and
task samplers.

Only the trainer and its commands call them, so they are specified here rather than in core: the
train plugin adds them to the plugin manager as it loads (its ``agentgym_add_hookspecs``), and a
plugin implements them with ``@agentgym.hookimpl`` like any hook. Cheap to import: the types are
imported for type checkers only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentgym.hookspecs import hookspec

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from agentgym_train.policies.base import Policy
    from agentgym_train.rl.horizon import Fixed
    from agentgym_train.rl.specs import AlgorithmSpec
    from agentgym_train.rollout.task_sampling import TaskSampler


@hookspec
def agentgym_algorithms() -> Sequence[AlgorithmSpec]:
    """Declare RL algorithms.

    Called when the trainer looks an algorithm up by name (``algorithm``), and by ``agentgym
    plugins``. Returns a list of :class:`agentgym_train.rl.specs.AlgorithmSpec`: a name, its
    advantage estimator (a callable or ``"module:function"``, imported when first used, so the hook
    stays cheap), whether it needs a critic or groups of samples, and the estimator's default
    parameters. Names are unique over all plugins.
    """


@hookspec
def agentgym_horizon_schedules() -> Mapping[str, Callable[..., Fixed]]:
    """Declare horizon (turn-cap) schedules.

    Called when the trainer builds a schedule by name. Returns a mapping from a name (``fixed``,
    ``scaling_inter``, ...) to a factory taking the schedule's parameters and returning a schedule
    like :class:`agentgym_train.rl.horizon.Fixed`: called with a training step, it gives that step's
    horizon; ``update(step, metrics)``, ``state_dict()`` and ``load_state_dict(state)`` carry its
    state across steps and checkpoints.
    """


@hookspec
def agentgym_policies() -> Mapping[str, Callable[..., Policy]]:
    """Declare policy backends.

    Called when a policy is built by name (``hf``, ``vllm``, ``openai``, ``scripted``...). Returns a
    mapping from a name to a factory taking keyword options and returning a
    :class:`agentgym_train.policies.Policy`: every member of it, which a subclass of
    :class:`agentgym_train.policies.BasePolicy` has, implementing ``generate(requests, sampling)
    -> list[Generation]`` (blocking) or ``agenerate`` (a coroutine). A policy that lacks a member
    is refused with a one-line error when it is built.

    ``agentgym eval`` and ``agentgym collect`` give a factory the options set on the command line
    among ``model``, ``base_url``, ``api_key``, ``concurrency`` and ``device``: those it names as
    parameters, or all of them when it takes ``**kwargs`` (it then ignores those it does not use).
    Sampling settings come with each call, in ``Sampling``.
    """


@hookspec
def agentgym_task_samplers() -> Mapping[str, Callable[..., TaskSampler]]:
    """Declare train-task samplers.

    Called when the native trainer builds its sampler by name (``task_sampler``: ``uniform``,
    ``difficulty``...). Returns a mapping from a name to a factory called as
    ``factory(pool, seed, **task_sampler_params)`` (``pool``: a
    :class:`agentgym_train.rollout.task_sampling.TaskPool`, the run's train task ids and their
    categories) and returning a :class:`agentgym_train.rollout.task_sampling.TaskSampler`:
    ``draw(k)`` gives a step's (env, task id) pairs, ``observe(outcomes)`` is told each played
    episode's (env, task id, success), ``estimate(env, task_id)`` its pass-rate estimate (logged),
    and ``state_dict()`` / ``load_state_dict(state)`` carry its state through checkpoints, so that a
    resumed run draws what an uninterrupted one would.
    """
