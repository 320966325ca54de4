"""Build every package's wheel and sdist into one folder that pip installs from.

``hatch run release:build`` runs this; it writes ``dist/`` at the repository root. Until the
packages are on PyPI, that folder is their package index: ``pip install --find-links dist
agentgym-env-babyai`` takes agentgym-core (and any other agentgym package) from it and everything
else from the configured index. The builds are ``uv build`` (isolated, from each package's
``pyproject.toml``: the sdist first, then the wheel from the sdist, so a file the sdist misses
fails here). The example plugin (``examples/``) is not a published package and is left out.

Run from anywhere: ``python scripts/build_dists.py [--out DIR]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "dist"


def packages() -> dict[str, Path]:
    """The published distributions: name -> folder, in a stable order (core first)."""
    found = {}
    for pyproject in sorted(ROOT.glob("packages/*/pyproject.toml")):
        found[tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["name"]] = pyproject.parent
    return dict(sorted(found.items(), key=lambda item: item[0] != "agentgym-core"))


def _uv() -> list[str]:
    # uv comes with Hatch (and with the release environment); as a module it is the one beside this
    # Python, not whatever `uv` is first on PATH.
    if importlib.util.find_spec("uv") is not None:
        return [sys.executable, "-m", "uv"]
    if found := shutil.which("uv"):
        return [found]
    raise SystemExit("build_dists: needs uv (pip install uv), or run it as `hatch run release:build`")


def build(out: Path = DEFAULT_OUT) -> list[Path]:
    """Build every package into ``out``; the files written, wheels and sdists."""
    out.mkdir(parents=True, exist_ok=True)
    dists = packages()
    # Older builds of our distributions go: an index holding two versions of one package would let
    # pip pick a stale one. Other files in the folder are left alone.
    for name in dists:
        stem = name.replace("-", "_")
        for old in [*out.glob(f"{stem}-*.whl"), *out.glob(f"{stem}-*.tar.gz")]:
            old.unlink()
    for name, folder in dists.items():
        print(f"build_dists: {name} ({folder.relative_to(ROOT)})", flush=True)
        subprocess.run(
            [*_uv(), "build", "--sdist", "--wheel", "--out-dir", str(out), str(folder)], check=True
        )
    return sorted(p for p in out.iterdir() if p.name.endswith((".whl", ".tar.gz")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the folder (default: dist/)")
    args = parser.parse_args()
    started = time.monotonic()
    files = build(args.out.resolve())
    for path in files:
        print(f"  {path.name}  ({path.stat().st_size / 1024:.0f} KiB)")
    print(
        f"build_dists: {len(files)} files in {args.out} in {time.monotonic() - started:.0f} s; "
        f"install with: pip install --find-links {args.out} agentgym-env-babyai"
    )


if __name__ == "__main__":
    main()
