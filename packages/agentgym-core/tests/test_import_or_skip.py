"""``agentgym.testing.import_or_skip``: a missing library skips its tests, except in a test
environment that declares it required (``AGENTGYM_TEST_REQUIRES``), where it fails them."""

from __future__ import annotations

import json

import pytest

from agentgym.testing import REQUIRES_VAR, import_or_skip

MODULE = """
from agentgym.testing import import_or_skip

import_or_skip("agentgym_not_installed.sub", reason="not here")


def test_never_runs():
    pass
"""


def test_an_importable_module_is_returned():
    assert import_or_skip("json") is json


def test_a_missing_module_skips_where_no_environment_requires_it(pytester, monkeypatch):
    monkeypatch.setenv(REQUIRES_VAR, "trl, verifiers")
    pytester.makepyfile(MODULE)
    result = pytester.runpytest("-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*test_a_missing_module_skips*.py:*: not here"])


@pytest.mark.parametrize("required", ["agentgym_not_installed", "trl,agentgym_not_installed.sub"])
def test_a_missing_module_fails_where_the_environment_requires_it_or_its_package(
    pytester, monkeypatch, required
):
    monkeypatch.setenv(REQUIRES_VAR, required)
    pytester.makepyfile(MODULE)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    assert result.ret != 0
    result.stdout.fnmatch_lines(
        ["*agentgym_not_installed.sub does not import, and this environment requires*ModuleNotFoundError*"]
    )
