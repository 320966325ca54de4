"""The snippets of core's README section "Use from other trainers" run as written, each in a fresh
interpreter in an empty folder (what they write goes under its ``runs/``)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.interop, pytest.mark.timeout(900)]
for module in ("trl", "verifiers", "openenv.core", "skyrl_gym"):
    pytest.importorskip(module)

README = Path(__file__).resolve().parents[2] / "packages" / "agentgym-core" / "README.md"


def snippets() -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Use from other trainers", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)


def test_the_section_has_a_snippet_per_library() -> None:
    found = snippets()
    for library in ("from trl", "verifiers", "from openenv", "import skyrl_gym"):
        assert sum(library in code for code in found) == 1, library


@pytest.mark.parametrize("index", range(4))
def test_a_snippet_runs_as_written(index: int, tmp_path: Path) -> None:
    code = snippets()[index]
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=840
    )
    assert done.returncode == 0, done.stderr[-3000:]
