"""Which installed envs can run on this machine: the JVM and browser envs need their programs."""

from __future__ import annotations


def why_not(env: str) -> str | None:
    """Why ``env`` cannot run here (not installed, no Java, no Chromium), or None if it can."""
    import agentgym

    if env not in agentgym.env_specs():
        return f"the {env} env is not installed"
    try:
        if env == "sciworld":
            from agentgym_sciworld.java import find_java

            find_java()
        if env == "webarena":
            from agentgym_webarena.browser import find_chromium

            find_chromium()
    except Exception as exc:  # noqa: BLE001 - the finder's own message says what to install
        return f"{env} cannot run here: {exc}"
    return None
