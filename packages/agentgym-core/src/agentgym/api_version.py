"""The plugin API's version (``API_VERSION``), and the check that a plugin was built for it.

A plugin module says which version of the plugin API it was written against with a module
attribute, ``AGENTGYM_API_VERSION = "1"`` (the number written out, never copied from
``agentgym.API_VERSION``, or the check could not fail). The plugin manager reads it before it
registers the plugin, so no hook of a plugin built for another API ever runs: the plugin is
reported and skipped, like any broken plugin. A plugin that declares nothing predates the
declaration and was written for version ``"1"``.

The version is a major number only. It goes up when a change breaks plugins written for the
previous one: a hook removed, renamed or called with other arguments, an ``EnvSpec`` or ``Split``
field removed or made required, a ``TextEnv`` method a subclass implements called differently, or
an ``info`` key the framework relies on changing meaning. Additions (a new optional field, hook,
option or route) do not change it.
"""

from __future__ import annotations

from typing import Any

#: The plugin API this agentgym-core implements.
API_VERSION = "1"
#: The module attribute in which a plugin declares the API version it was built for.
ATTRIBUTE = "AGENTGYM_API_VERSION"
#: What a plugin that declares nothing was built for.
UNDECLARED = "1"


def _declared(plugin: Any) -> Any:
    try:  # a plugin object's own __getattr__ may raise anything
        return getattr(plugin, ATTRIBUTE, UNDECLARED)
    except Exception as exc:  # noqa: BLE001 - reported as no version, with the reason
        return f"<reading it raised {type(exc).__name__}>"


def declared_version(plugin: Any) -> str | None:
    """The API version ``plugin`` declares (``UNDECLARED`` when none), or ``None`` when what it
    declares is no version (not a whole number)."""
    value = _declared(plugin)
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    text = str(value).strip()
    return text if text.isascii() and text.isdigit() else None


def incompatibility(plugin: Any) -> str | None:
    """Why ``plugin`` cannot be loaded by this agentgym-core, in one line (``None`` when it can)."""
    declared = declared_version(plugin)
    if declared is None:
        value = _declared(plugin)
        return f'{ATTRIBUTE} = {value!r} is no API version: write the major number, e.g. "{API_VERSION}"'
    if int(declared) == int(API_VERSION):
        return None
    if int(declared) > int(API_VERSION):
        fix = "upgrade agentgym-core"
    else:
        fix = (
            f"upgrade the plugin to a release built for version {API_VERSION}, or use an older agentgym-core"
        )
    return (
        f"built for agentgym plugin API version {declared}, but this agentgym-core implements "
        f"version {API_VERSION}: {fix}"
    )
