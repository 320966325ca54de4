"""Hook specifications of AgentGym's plugin system (pluggy project ``agentgym``).

Every plugin is a module registered over the ``agentgym`` entry-point group; it implements any of
the hooks below with ``@agentgym.hookimpl``. Built-in implementations (core's reward transforms,
the train package's algorithms) register exactly like third-party ones.

Core specifies the hooks every package needs. A hook that only one package calls is specified in
that package, which adds its specs when its plugin loads (``agentgym_add_hookspecs``):
``agentgym_algorithms``, ``agentgym_policies``, ``agentgym_horizon_schedules`` and
``agentgym_task_samplers`` in ``agentgym_train.hookspecs``,
``agentgym_retrievers`` and ``agentgym_datasets`` in ``agentgym_search.hookspecs``.

A plugin module must stay cheap to import: declare specs here, import heavy libraries (minigrid,
scienceworld, playwright, torch) inside the factories they name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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


@hookspec(historic=True)
def agentgym_add_hookspecs(pluginmanager: pluggy.PluginManager) -> None:
    """Add the specs of a package's own hooks.

    Called once for each plugin implementing it, as that plugin registers (a historic hook), with
    the ``pluggy.PluginManager``; an implementation calls ``pluginmanager.add_hookspecs(module)``
    with its package's hookspecs module. Returns nothing. Plugins load in no set order, so a plugin
    may implement a hook before the package specifying it loads: unknown hooks are looked for once
    every entry point is registered.
    """
