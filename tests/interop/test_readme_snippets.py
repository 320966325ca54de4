"""The snippets of core's README section "Use from other trainers" run as written, each in a fresh
interpreter in an empty folder (what they write goes under its ``runs/``)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from agentgym.testing import import_or_skip

pytestmark = [pytest.mark.interop, pytest.mark.timeout(900)]
for module in ("trl", "verifiers", "openenv.core", "skyrl_gym"):
    import_or_skip(module)

README = Path(__file__).resolve().parents[2] / "packages" / "agentgym-core" / "README.md"


def snippets() -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Use from other trainers", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)


def test_the_section_has_a_snippet_per_library() -> None:
    found = snippets()
    for library in ("from trl", "verifiers", "from openenv", "import skyrl_gym"):
        assert sum(library in code for code in found) == 1, library


#: What each snippet must show besides exiting 0, by the library it uses: TRL logs the env's
#: returns under the metric the README names; verifiers prints one reward in [0, 1] per task; the
#: OpenEnv and SkyRL-gym snippets print an observation of a turn on task 7, its reward and done.
SHOWS = {
    "from trl": lambda out, _: re.search(r"'rewards/AgentGymBabyai/mean': '?[0-9.]+", out),
    "verifiers": lambda out, _: any(
        len(vals := [float(x) for x in found.split(", ")]) == 2 and all(0.0 <= v <= 1.0 for v in vals)
        for found in re.findall(r"\[(\d+\.\d+(?:, \d+\.\d+)*)\]", out)
    ),
    "from openenv": lambda out, obs: out.rstrip().endswith(" 0.0 False") and obs.splitlines()[0][:30] in out,
    "import skyrl_gym": lambda out, obs: (
        out.rstrip().endswith(" 0.0 False") and obs.splitlines()[0][:30] in out
    ),
}


def turn_left_on_task_7() -> str:
    """The observation the OpenEnv and SkyRL-gym snippets' turn must print."""
    import agentgym

    env = agentgym.make("babyai")
    env.reset(options={"task_id": 7})
    return env.step("turn left")[0]


@pytest.mark.parametrize("index", range(4))
def test_a_snippet_runs_as_written_and_shows_what_it_says(index: int, tmp_path: Path) -> None:
    code = snippets()[index]
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=840
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (shows,) = [check for library, check in SHOWS.items() if library in code]
    out = done.stdout + done.stderr  # TRL's progress bar writes its logged values to stderr
    assert shows(out, turn_left_on_task_7()), out[-3000:]
