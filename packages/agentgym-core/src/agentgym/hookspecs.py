"""Hook specifications of AgentGym's plugin system (pluggy project ``agentgym``).

Every plugin is a module registered over the ``agentgym`` entry-point group; it implements any of
the hooks below with ``@agentgym.hookimpl``. Built-in implementations (core's reward transforms,
the train package's algorithms) register exactly like third-party ones.

A plugin module must stay cheap to import: declare specs here, import heavy libraries (minigrid,
scienceworld, playwright, torch) inside the factories they name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    import click

    from agentgym.spec import EnvSpec
    from agentgym.trajectory import Episode

PROJECT = "agentgym"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def agentgym_envs() -> Sequence[EnvSpec]:
    """Declare environments.

    Called once when the plugin manager loads (``agentgym envs``, ``agentgym serve``,
    ``agentgym.make``...). Returns a list of :class:`agentgym.spec.EnvSpec`. Env names must be
    unique over all installed plugins: an env two plugins declare is served by neither, and both
    are reported (``agentgym plugins``) with their distributions, as is a spec that fails
    validation (``EnvSpec.problems``).
    """


@hookspec
def agentgym_reward_transforms() -> Mapping[str, Callable[..., list[float]]]:
    """Declare reward transforms.

    Called when the reward-transform registry is first used. Returns a mapping from a name to a
    function ``f(episode, **params) -> list[float]`` that maps an episode's per-step env rewards
    to per-step training rewards (normalise, success-only, step penalty, format penalty...).
    """


@hookspec
def agentgym_algorithms() -> Sequence[Any]:
    """Declare RL algorithms.

    Called when the trainer builds its algorithm registry. Returns a list of ``AlgorithmSpec``
    (defined by ``agentgym-train``): an advantage estimator, whether it needs a critic, and its
    loss defaults.
    """


@hookspec
def agentgym_horizon_schedules() -> Mapping[str, Callable[..., Any]]:
    """Declare horizon (turn-cap) schedules.

    Called when the trainer builds its schedule registry. Returns a mapping from a name
    (``fixed``, ``scaling_inter``, ...) to a factory taking the schedule's config and returning an
    object that gives the horizon for a training step.
    """


@hookspec
def agentgym_policies() -> Mapping[str, Callable[..., Any]]:
    """Declare policy backends.

    Called when a policy is built by name (``hf``, ``vllm``, ``openai``, ``scripted``...). Returns a
    mapping from a name to a factory taking keyword options and returning an object with
    ``generate(requests, sampling) -> list[Generation]`` (or ``agenerate``, a coroutine).

    ``agentgym eval`` and ``agentgym collect`` give a factory the options set on the command line
    among ``model``, ``base_url``, ``api_key``, ``concurrency`` and ``device``: those it names as
    parameters, or all of them when it takes ``**kwargs`` (it then ignores those it does not use).
    Sampling settings come with each call, in ``Sampling``.
    """


@hookspec
def agentgym_retrievers() -> Mapping[str, Callable[..., Any]]:
    """Declare retrievers for the search env (``agentgym-env-search``).

    Called when a search env or ``agentgym search serve-retriever`` first needs a retriever by
    name. Returns a mapping from a name (``bm25``, ``dense``, ``http``, ...) to a factory, or its
    ``"module:attr"`` string, called as ``factory(corpus, **options)`` and returning an object with
    ``search(queries, k) -> list[list[Hit]]``; a factory with ``needs_corpus = False`` gets ``None``
    for the corpus (a client of a remote index).
    """


@hookspec
def agentgym_datasets() -> Mapping[str, Any]:
    """Declare named data sets for envs that read external data (the search env's corpus and questions).

    Called when an env is configured with a data set's name (``AGENTGYM_SEARCH_DATA=name``).
    Returns a mapping from a name to the env's data object (for search an
    ``agentgym_search.data.SearchData``) or a callable returning it.
    """


@hookspec
def agentgym_cli(cli: click.Group) -> None:
    """Add subcommands to the ``agentgym`` command line.

    Called once when the CLI starts, with the root ``click.Group``; implementations call
    ``cli.add_command(...)``. Returns nothing.
    """


@hookspec
def agentgym_episode_end(episode: Episode) -> None:
    """Observe a finished episode.

    Called after every episode that a rollout, an evaluation or ``agentgym play`` finishes, with
    the complete :class:`agentgym.trajectory.Episode`. For loggers and metric sinks; the return
    value is ignored and an implementation must not modify the episode.
    """
