from pathlib import Path

import pytest

# AgentGym's conformance suite against the webarena env, in headless Chromium: determinism,
# invalid actions, spaces, HTTP parity, and the expert on a sample of both splits.
agentgym_conformance = {"env": "webarena", "sample": 3, "expert_sample": 6}

HERE = Path(__file__).parent
# Modules that need no browser (the action grammar, the evaluators, the sites over HTTP). Every
# other test here, the conformance suite included, drives Chromium: marker `browser`, skipped with
# the reason when no Chromium is found.
NO_BROWSER_MODULES = {"test_actions.py", "test_sites.py"}


def _browser_reason() -> str | None:
    from agentgym_webarena.browser import BrowserNotFoundError, find_chromium

    try:
        find_chromium()
    except BrowserNotFoundError as exc:
        return f"{exc.message} (CI installs it: .ci/run)"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason, checked = None, False
    for item in items:
        path = Path(str(item.path))
        if HERE not in path.parents or path.name in NO_BROWSER_MODULES:
            continue
        item.add_marker(pytest.mark.browser)
        if not checked:
            reason, checked = _browser_reason(), True
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))
