"""``agentgym new-env NAME``: write a ready-to-install env plugin package from templates.

The templates are package data under ``agentgym/templates/new_env/``: each ``*.tmpl`` file is a
``string.Template`` (``$name``, ``$module``, ...; ``$$`` for a literal dollar) whose path, with
``.tmpl`` dropped and ``__module__`` replaced by the import name, is where it goes in the new
package. The package as generated is a small working env that passes the conformance suite.
"""

from __future__ import annotations

import re
import shutil
import string
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path, PurePosixPath

import click
from rich.console import Console

from agentgym.errors import AgentGymError
from agentgym.spec import NAME_RE

TEMPLATE_DIR = "templates/new_env"
TEMPLATE_SUFFIX = ".tmpl"
MODULE_PLACEHOLDER = "__module__"
#: Entry-point names an env plugin may not take (core's built-ins register as ``core``).
RESERVED_NAMES = frozenset({"core"})


class NewEnvError(AgentGymError):
    """``agentgym new-env`` cannot write the package (a bad name, or the folder exists)."""

    code = "new_env"
    status = 400


@dataclass(frozen=True)
class PackageNames:
    """The names of an env plugin package, all derived from the env name."""

    name: str  # env name and entry-point name: "my-env"
    dist: str  # distribution and folder: "agentgym-env-my-env"
    module: str  # import name: "agentgym_my_env"
    class_name: str  # the TextEnv subclass: "MyEnvEnv"
    title: str  # for prose: "My Env"

    @classmethod
    def from_name(cls, name: str) -> PackageNames:
        check_name(name)
        parts = [p for p in re.split(r"[-_]", name) if p]
        return cls(
            name=name,
            dist=f"agentgym-env-{name}",
            module=f"agentgym_{name.replace('-', '_')}",
            class_name="".join(p[:1].upper() + p[1:] for p in parts) + "Env",
            title=" ".join(p[:1].upper() + p[1:] for p in parts),
        )


def check_name(name: str) -> None:
    """Raise :class:`NewEnvError` unless ``name`` is a valid env name (as ``EnvSpec`` requires)."""
    if not NAME_RE.match(name):
        raise NewEnvError(
            f"invalid env name {name!r}: start with a lowercase letter, then lowercase letters, "
            "digits, '-' and '_'"
        )
    if name in RESERVED_NAMES:
        raise NewEnvError(f"invalid env name {name!r}: reserved for agentgym-core's own plugin")
    from importlib import metadata
    from importlib.util import find_spec

    taken = {ep.name: ep.dist.name if ep.dist else "?" for ep in metadata.entry_points(group="agentgym")}
    if name in taken:
        raise NewEnvError(
            f"env name {name!r} is taken: distribution {taken[name]!r} installs a plugin of that name"
        )
    module = f"agentgym_{name.replace('-', '_')}"
    if find_spec(module) is not None:
        raise NewEnvError(f"env name {name!r} is taken: the module {module!r} is already installed")


def _templates() -> Traversable:
    return resources.files("agentgym").joinpath(TEMPLATE_DIR)


def _walk(node: Traversable, prefix: PurePosixPath) -> list[tuple[PurePosixPath, Traversable]]:
    out: list[tuple[PurePosixPath, Traversable]] = []
    for child in sorted(node.iterdir(), key=lambda c: c.name):
        if child.is_dir():
            if child.name != "__pycache__":
                out.extend(_walk(child, prefix / child.name))
        elif child.name.endswith(TEMPLATE_SUFFIX):
            out.append((prefix / child.name, child))
    return out


def render(name: str, *, core_version: str | None = None) -> dict[PurePosixPath, str]:
    """The files of the package for env ``name``: relative path -> text (nothing is written)."""
    names = PackageNames.from_name(name)
    if core_version is None:
        import agentgym

        core_version = agentgym.__version__
    values = {
        "name": names.name,
        "dist": names.dist,
        "module": names.module,
        "class_name": names.class_name,
        "title": names.title,
        "core_version": core_version,
    }
    files: dict[PurePosixPath, str] = {}
    for rel, template in _walk(_templates(), PurePosixPath()):
        target = str(rel)[: -len(TEMPLATE_SUFFIX)].replace(MODULE_PLACEHOLDER, names.module)
        try:
            text = string.Template(template.read_text(encoding="utf-8")).substitute(values)
        except (KeyError, ValueError) as exc:  # a bug in the template, not the user's doing
            raise RuntimeError(f"template agentgym/{TEMPLATE_DIR}/{rel}: {exc}") from exc
        files[PurePosixPath(target)] = text
    if not files:
        raise NewEnvError(f"no templates found in agentgym/{TEMPLATE_DIR} (a broken agentgym-core install?)")
    return files


def new_env(name: str, parent: str | Path = ".") -> Path:
    """Write the package ``<parent>/agentgym-env-<name>/`` and return its folder.

    Refuses (:class:`NewEnvError`) an invalid name or an existing folder; writes nothing then.
    ``parent`` is created if missing.
    """
    names = PackageNames.from_name(name)
    files = render(name)
    root = Path(parent) / names.dist
    if root.exists():
        raise NewEnvError(f"{root} already exists; choose another name or --dir, or remove it")
    try:
        Path(parent).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise NewEnvError(f"cannot create the folder {parent}: {exc.strerror or exc}") from None
    try:
        root.mkdir()
    except FileExistsError:
        raise NewEnvError(f"{root} already exists; choose another name or --dir, or remove it") from None
    except OSError as exc:
        raise NewEnvError(f"cannot create {root}: {exc.strerror or exc}") from None
    try:
        for rel, text in files.items():
            path = root.joinpath(*rel.parts)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)  # no half-written package left behind
        raise
    return root


@click.command("new-env")
@click.argument("name")
@click.option(
    "--dir",
    "parent",
    type=click.Path(file_okay=False, path_type=str),
    default=".",
    show_default=True,
    help="Folder to write agentgym-env-NAME/ in (created if missing).",
)
def new_env_command(name: str, parent: str) -> None:
    """Write a ready-to-install env plugin package, agentgym-env-NAME/.

    The package holds a small working env (sort a list by swaps), its expert, the EnvSpec, a
    README and tests: it passes the conformance suite as generated. Replace the game with yours.
    """
    root = new_env(name, parent)
    from agentgym.plugins import get_registry

    names = PackageNames.from_name(name)
    try:
        installed = get_registry().envs()
    except AgentGymError:
        installed = {}
    if name in installed:
        Console(stderr=True, highlight=False).print(
            f"agentgym: warning: an env named {name!r} is already installed (distribution "
            f"{installed[name].distribution}); the two cannot be installed together",
            soft_wrap=True,
        )
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    where = str(root) if root.is_absolute() or str(root).startswith(".") else f"./{root}"
    click.echo(f"created {where}/ (env {name!r}, import name {names.module}):")
    for f in files:
        click.echo(f"  {f}")
    steps = [
        (f"pip install -e '{where}[test]'", f"then 'agentgym envs' lists {name}"),
        (f"agentgym play {name} --expert", "watch the expert solve a task"),
        (f"pytest {where}", "the conformance suite and the package's tests"),
    ]
    width = max(len(cmd) for cmd, _ in steps)
    click.echo("next (then replace the game in env.py, tasks.py and expert.py with yours):")
    for cmd, note in steps:
        click.echo(f"  {cmd:<{width}}  # {note}")
