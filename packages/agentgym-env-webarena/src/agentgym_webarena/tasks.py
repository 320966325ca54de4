"""Task configs in WebArena's JSON format, and where their sites are.

A config holds ``task_id``, ``sites``, ``start_url`` (several tabs joined with `` |AND| ``),
``intent``, ``require_login``, ``storage_state`` and ``eval``; URLs name sites by placeholder
(``__SHOPPING__``, ``__REDDIT__``, ...), replaced with the URLs in WebArena's environment variables
(``SHOPPING``, ``SHOPPING_ADMIN``, ``REDDIT``, ``GITLAB``, ``MAP``, ``WIKIPEDIA``, ``HOMEPAGE``). Where
a variable is unset, ``shopping`` and ``reddit`` are the bundled shop and forum, started on
loopback on first use.

Task sources: the bundled tasks (``tasks/bundled.json``), or ``$AGENTGYM_WEBARENA_TASKS``: a folder
of WebArena config files (``config_files/*.json``, one task or a list per file) or one JSON file
holding a list. A config may carry our own ``"agentgym"`` object: ``split`` (default ``test``),
``category`` (default: the sites and eval types), ``expert`` (the bundled tasks' scripted solution)
and ``login`` (the bundled account to sign in with).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from agentgym_webarena.evaluators import TaskConfigError

SITES = {
    "shopping": "SHOPPING",
    "shopping_admin": "SHOPPING_ADMIN",
    "reddit": "REDDIT",
    "gitlab": "GITLAB",
    "map": "MAP",
    "wikipedia": "WIKIPEDIA",
    "homepage": "HOMEPAGE",
}
BUNDLED_SITES = ("shopping", "reddit")
TASKS_VAR = "AGENTGYM_WEBARENA_TASKS"
AUTH_DIR_VAR = "AGENTGYM_WEBARENA_AUTH_DIR"
AND = " |AND| "


def placeholder(site: str) -> str:
    return f"__{SITES[site]}__"


def configured_site_url(site: str) -> str | None:
    """The deployment's URL for ``site`` from WebArena's environment variable, if set."""
    value = os.environ.get(SITES[site], "").strip()
    return value.rstrip("/") or None


def uses_bundled(site: str) -> bool:
    return site in BUNDLED_SITES and configured_site_url(site) is None


def site_urls(sites: list[str]) -> dict[str, str]:
    """site -> base URL for the sites a task names (starting the bundled sites where needed)."""
    out = {}
    for site in sites:
        if site not in SITES:
            raise TaskConfigError(f"unknown site {site!r} (WebArena's: {', '.join(SITES)})")
        url = configured_site_url(site)
        if url is None and site in BUNDLED_SITES:
            from agentgym_webarena.sites.server import shared_sites

            url = shared_sites().urls[site]
        if url is None:
            raise TaskConfigError(f"the task needs the {site} site: set ${SITES[site]} to its URL")
        out[site] = url
    return out


def origin(url: str) -> str:
    """``scheme://host[:port]`` of ``url``, lower case: what the route guard compares."""
    parsed = urlparse(url)
    return f"{parsed.scheme}://{parsed.netloc}".lower()


def storage_state(config: Mapping[str, Any], bundled: bool) -> str | None:
    """A real deployment's login cookies: WebArena's ``storage_state`` file, looked up as given,
    then under ``$AGENTGYM_WEBARENA_AUTH_DIR``; None where the task needs none (or signs in to the
    bundled sites, which the env does itself)."""
    given = config.get("storage_state")
    if not given or not config.get("require_login") or bundled:
        return None
    candidates = [Path(given)]
    if os.environ.get(AUTH_DIR_VAR):
        candidates.append(Path(os.environ[AUTH_DIR_VAR]) / Path(given).name)
    for path in candidates:
        if path.is_file():
            return str(path)
    raise TaskConfigError(
        f"the task needs the login state {given!r}: make it with WebArena's auto-login script and "
        f"put it there or in ${AUTH_DIR_VAR}"
    )


def resolve(config: Mapping[str, Any], urls: Mapping[str, str]) -> dict[str, Any]:
    """The config with every site placeholder replaced by its URL."""
    text = json.dumps(config)
    for site, url in urls.items():
        text = text.replace(placeholder(site), url)
    # a placeholder of a site the task does not name (a link to the homepage, say)
    for site in SITES:
        if placeholder(site) in text:
            other = site_urls([site])[site]
            text = text.replace(placeholder(site), other)
    return json.loads(text)


def validate(config: Any, where: str) -> dict[str, Any]:
    if not isinstance(config, dict):
        raise TaskConfigError(f"{where}: a task config is a JSON object")
    missing = [k for k in ("intent", "start_url", "eval") if k not in config]
    if missing:
        raise TaskConfigError(f"{where}: missing {', '.join(missing)}")
    types = config["eval"].get("eval_types") if isinstance(config["eval"], dict) else None
    if not types or not set(types) <= {"string_match", "url_match", "program_html"}:
        raise TaskConfigError(f"{where}: eval.eval_types must list string_match, url_match or program_html")
    sites = config.get("sites") or []
    unknown = [s for s in sites if s not in SITES]
    if unknown:
        raise TaskConfigError(f"{where}: unknown site(s) {unknown} (WebArena's: {', '.join(SITES)})")
    return config


def load_file(path: Path) -> list[dict[str, Any]]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TaskConfigError(f"{path}: {exc}") from None
    items = raw if isinstance(raw, list) else [raw]
    return [validate(c, f"{path}[{i}]" if isinstance(raw, list) else str(path)) for i, c in enumerate(items)]


def load_tasks(source: str | os.PathLike | None = None) -> list[dict[str, Any]]:
    """Tasks in id order: the bundled ones, or a folder / file of WebArena configs."""
    if source is None:
        text = (resources.files("agentgym_webarena") / "tasks" / "bundled.json").read_text(encoding="utf-8")
        return [validate(c, f"bundled task {i}") for i, c in enumerate(json.loads(text))]
    path = Path(source)
    if path.is_dir():
        files = sorted(
            path.glob("*.json"),
            key=lambda p: (not p.stem.isdigit(), int(p.stem) if p.stem.isdigit() else 0, p.name),
        )
        if not files:
            raise TaskConfigError(f"{path} holds no *.json task configs")
        return [c for f in files for c in load_file(f)]
    if path.is_file():
        return load_file(path)
    raise TaskConfigError(f"no such task folder or file: {path}")


def category(config: Mapping[str, Any]) -> str:
    ours = config.get("agentgym") or {}
    if ours.get("category"):
        return str(ours["category"])
    sites = "+".join(config.get("sites") or ["web"])
    return f"{sites}/{'+'.join(config['eval']['eval_types'])}"


def split_of(config: Mapping[str, Any]) -> str:
    return str((config.get("agentgym") or {}).get("split", "test"))


_cache: dict[str, list[dict[str, Any]]] = {}
_lock = threading.Lock()


def configured_tasks(source: str | None = None) -> list[dict[str, Any]]:
    """The tasks of ``source`` (default ``$AGENTGYM_WEBARENA_TASKS``, else the bundled ones), read
    once per process."""
    source = source or os.environ.get(TASKS_VAR, "").strip() or None
    key = str(source or "")
    with _lock:
        if key not in _cache:
            _cache[key] = load_tasks(source)
        return _cache[key]
