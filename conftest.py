"""The order the whole suite runs in: the modules with the longest tests first.

``hatch test`` runs the suite on a worker per core (pytest-xdist, ``--dist worksteal``: hatch.toml),
which hands out tests in collection order and lets an idle worker take tests another has been sent
but not begun. Collected as they are, the reliability suite's runs of minutes come last, and one
worker plays them while the other, done, idles. Begun first, they overlap the many short tests.
Whole modules move, in their own order, so that a module's fixtures are set up once per worker."""

from __future__ import annotations

import pytest


def _rank(items: list[pytest.Item]) -> int:
    """0: the module runs a real model; 1: it has other slow tests; 2: neither."""
    if any(item.get_closest_marker("real_model") for item in items):
        return 0
    return 1 if any(item.get_closest_marker("slow") for item in items) else 2


@pytest.hookimpl(trylast=True)  # after the plugins that mark their tests and pytest's own grouping
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)
    rank = {module: _rank(members) for module, members in modules.items()}
    items.sort(key=lambda item: rank[item.nodeid.split("::")[0]])  # stable: each module keeps its order
