"""The quick starts, true as written: each gets a fresh virtual environment holding exactly what it
installs, and its commands and Python run as written.

The code is read from the docs when this runs, so the two cannot drift apart:

- ``packages/agentgym-core/README.md``, sections "Install" and "Use", then the Python block of the
  root README's "Use an environment" (it uses what the core README installs);
- ``docs/plugins.md``, sections "Start" (a plugin from ``agentgym new-env`` to its tests) and
  "Publish" (its wheel and sdist), in a second fresh environment;
- ``packages/agentgym-env-babyai/README.md``: "Install" (``agentgym-env-babyai`` alone), the Python
  block of "Use" (make, reset, step) and "Check it" (``agentgym check babyai``), in a third.

Our packages are not on PyPI yet, so the docs install them as a user does today: ``pip install
--find-links dist ...``, ``dist/`` being the folder ``hatch run release:build`` writes in a checkout
(``scripts/build_dists.py``). This builds that folder once, from this checkout, and gives each quick
start a copy as ``dist/`` in its working folder; everything else comes from the configured package
index. A ``pip install`` naming one of our packages without ``--find-links`` fails, as it does for a
user. ``agentgym serve`` runs until its ``/health`` answers and is then stopped with Ctrl-C's signal.
At the end no plugin may report a problem and torch must not be installed: none of these quick
starts needs it. (The root README's own quick start, ``hatch run demo``, trains on CPU with torch;
``hatch test`` covers it.)

Run from anywhere: ``python tests/quickstart/run_quickstart.py [--only NAME] [--dist DIR] [--keep]``;
CI runs it (``.ci/run``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: name -> the sections it runs, in order: (doc, heading[, the only language of block to run]).
QUICK_STARTS: dict[str, list[tuple[str, ...]]] = {
    "core": [
        ("packages/agentgym-core/README.md", "## Install"),
        ("packages/agentgym-core/README.md", "## Use"),
        ("README.md", "## Use an environment"),
    ],
    "plugin": [("docs/plugins.md", "## Start"), ("docs/plugins.md", "## Publish")],
    "babyai": [
        ("packages/agentgym-env-babyai/README.md", "## Install"),
        # its Python only: the bash block's `agentgym play` waits for keys
        ("packages/agentgym-env-babyai/README.md", "## Use", "python"),
        ("packages/agentgym-env-babyai/README.md", "## Check it"),
    ],
}
BUILD = ROOT / "scripts" / "build_dists.py"
#: Variables that would point pip elsewhere or change which plugins load: a user has none of them.
DROPPED = ("PYTHONPATH", "PIP_USER", "PIP_TARGET", "PIP_PREFIX", "PIP_REQUIRE_VIRTUALENV", "VIRTUAL_ENV")


def blocks(doc: str, heading: str) -> list[tuple[str, str]]:
    """``(language, code)`` of each fenced block in ``doc``'s section ``heading``."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    if f"\n{heading}\n" not in text:
        raise SystemExit(f"quickstart: {doc} has no section {heading!r}")
    section = re.split(r"^## ", text.split(f"\n{heading}\n", 1)[1], maxsplit=1, flags=re.M)[0]
    found = re.findall(r"```(\w+)\n(.*?)```", section, re.S)
    if not found:
        raise SystemExit(f"quickstart: {doc}'s section {heading!r} has no code block")
    return found


def without_comment(command: str) -> str:
    """``command`` without its ``# comment``, each ``&&`` part as the shell reads it."""
    parts = [shlex.join(shlex.split(part, comments=True)) for part in command.split("&&")]
    return " && ".join(p for p in parts if p)


class Venv:
    """A fresh virtual environment, and a shell-like way to run commands in it."""

    def __init__(self, home: Path, dist: Path):
        self.home = home
        self.cwd = home / "work"
        self.cwd.mkdir(parents=True)
        # A copy: a quick start may build into its dist/ (docs/plugins.md's "Publish" does).
        shutil.copytree(dist, self.cwd / "dist")
        subprocess.run([sys.executable, "-m", "venv", str(home / "venv")], check=True)
        self.bin = home / "venv" / "bin"
        self.env = {k: v for k, v in os.environ.items() if k not in DROPPED and not k.startswith("AGENTGYM_")}
        self.env.update(PATH=f"{self.bin}{os.pathsep}{os.environ['PATH']}", VIRTUAL_ENV=str(home / "venv"))

    def run(self, command: str, timeout: float = 900) -> str:
        print(f"$ {command}", flush=True)
        started = time.monotonic()
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=self.cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout,
        )
        print(done.stdout[-4000:], end="", flush=True)
        print(f"  ({time.monotonic() - started:.1f} s)", flush=True)
        if done.returncode != 0:
            raise SystemExit(f"quickstart: {command!r} failed with exit code {done.returncode}")
        return done.stdout

    def serve(self, command: str) -> None:
        """Run an ``agentgym serve`` line until ``/health`` answers, then stop it as Ctrl-C does."""
        print(f"$ {command}   (in the background, until /health answers)", flush=True)
        port = re.search(r"--port[ =](\d+)", command)
        url = f"http://127.0.0.1:{port.group(1) if port else 36001}/health"
        server = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=self.cwd, env=self.env)
        try:
            deadline = time.monotonic() + 120
            while True:
                if server.poll() is not None:
                    raise SystemExit(f"quickstart: {command!r} exited with code {server.returncode}")
                try:
                    with urllib.request.urlopen(url, timeout=5) as answer:
                        health = json.loads(answer.read())
                        break
                except OSError:
                    if time.monotonic() > deadline:
                        raise SystemExit(f"quickstart: {command!r}: {url} never answered") from None
                    time.sleep(0.5)
        finally:
            server.send_signal(signal.SIGINT)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        if server.returncode not in (0, -signal.SIGINT):
            raise SystemExit(f"quickstart: {command!r} did not stop cleanly (exit code {server.returncode})")
        words, named = iter(shlex.split(command)[2:]), []
        for word in words:
            if not word.startswith("-"):
                named.append(word)
            elif "=" not in word:
                next(words, None)  # the option's value
        if not set(named) <= set(health["envs"]):  # not another server on that port
            raise SystemExit(f"quickstart: {url} serves {health['envs']}, not {named}")
        print(f"  /health: {health['status']}, envs {health['envs']}", flush=True)


def run_block(venv: Venv, language: str, code: str, where: str) -> int:
    """Run one block as written; the number of commands run."""
    if language == "python":
        script = venv.cwd / "block.py"
        script.write_text(code, encoding="utf-8")
        venv.run(f"python {shlex.quote(str(script))}  # {where}")
        return 1
    if language != "bash":
        raise SystemExit(f"quickstart: {where} has a {language!r} block; only bash and python run")
    count = 0
    for line in code.splitlines():
        command = without_comment(line)
        if not command:
            continue
        if shlex.split(command)[:2] == ["agentgym", "serve"]:
            venv.serve(command)
        else:
            venv.run(command)
        count += 1
    return count


def check_the_result(venv: Venv) -> None:
    """No plugin problem, and no torch: the quick starts do not need it."""
    venv.run("agentgym plugins --json > plugins.json")
    venv.run(
        "python -c \"import json, sys; bad = [(p['name'], p['problems']) for p in json.load(open('plugins.json'))"
        " if p['problems']]; sys.exit(f'plugin problems: {bad}' if bad else 0)\""
    )
    venv.run(
        "python -c \"import importlib.util, sys; sys.exit('torch is installed' if "
        "importlib.util.find_spec('torch') else 0)\""
    )


def run_quick_start(name: str, home: Path, dist: Path) -> int:
    print(f"== quick start {name!r}: a fresh virtual environment in {home}", flush=True)
    started = time.monotonic()
    venv = Venv(home, dist)
    count = 0
    for doc, heading, *only in QUICK_STARTS[name]:
        for language, code in blocks(doc, heading):
            if language in (only or [language]):
                count += run_block(venv, language, code, f"{doc}, {heading}")
    check_the_result(venv)
    print(f"== quick start {name!r}: passed in {time.monotonic() - started:.0f} s", flush=True)
    return count


def build_dists(out: Path) -> Path:
    """Every package's wheel and sdist in ``out``, as ``hatch run release:build`` writes ``dist/``."""
    started = time.monotonic()
    subprocess.run([sys.executable, str(BUILD), "--out", str(out)], check=True, stdout=subprocess.DEVNULL)
    files = [p for p in out.iterdir() if p.name.endswith((".whl", ".tar.gz"))]
    print(
        f"quickstart: built {len(files)} wheels and sdists into {out} in {time.monotonic() - started:.0f} s"
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the virtual environments")
    parser.add_argument("--only", choices=sorted(QUICK_STARTS), help="run one quick start")
    parser.add_argument(
        "--dist", type=Path, help="a folder `hatch run release:build` wrote (default: build one)"
    )
    args = parser.parse_args()
    started = time.monotonic()
    base = Path(tempfile.mkdtemp(prefix="agentgym-quickstart-"))
    try:
        dist = args.dist.resolve() if args.dist else build_dists(base / "dist")
        count = sum(
            run_quick_start(name, base / name, dist) for name in QUICK_STARTS if args.only in (None, name)
        )
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    print(f"quickstart: {count} commands and blocks ran as written in {time.monotonic() - started:.0f} s")
    ran = [name for name in QUICK_STARTS if args.only in (None, name)]
    print(f"quickstart: {len(ran)} passed, 0 failed")


if __name__ == "__main__":
    main()
