"""The observation text of a session's current tab (its tabs, accessibility tree with stable
``[id]``s, URL, objective, previous action and notes), and the ``[id]``s it has handed out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentgym_webarena import axtree
from agentgym_webarena.session import BrowserSession

#: reads of a page a navigation kept interrupting before the last one is taken as it is
READS = 3


class ElementIds:
    """The ``[id]``s of one episode: each element gets the next number the first time an observation
    shows it, and keeps it while it lives; the latest observation's ids are the ones an action may
    use."""

    def __init__(self) -> None:
        self._ids: dict[tuple[int, int], int] = {}  # (tab, backend node id) -> [id]
        self._elements: dict[int, tuple[Any, int]] = {}  # [id] -> (tab, backend node id)
        self.shown: set[int] = set()

    def numbering(self, page: Any) -> Callable[[int], int]:
        """``number(backend node id) -> [id]`` for the elements of ``page``."""

        def number(backend: int) -> int:
            key = (id(page), backend)
            if key not in self._ids:
                self._ids[key] = len(self._ids) + 1
                self._elements[self._ids[key]] = (page, backend)
            return self._ids[key]

        return number

    def find(self, element: int) -> tuple[Any, int] | None:
        """(tab, backend node id) of an ``[id]`` the latest observation showed; None for any other."""
        return self._elements[element] if element in self.shown else None

    def save(self) -> tuple[dict[tuple[int, int], int], dict[int, tuple[Any, int]]]:
        return dict(self._ids), dict(self._elements)

    def restore(self, saved: tuple[dict[tuple[int, int], int], dict[int, tuple[Any, int]]]) -> None:
        self._ids, self._elements = saved


async def observe(session: BrowserSession, ids: ElementIds, intent: str, previous_action: str) -> str:
    """The observation of the session's current tab; drains the session's notes."""
    await session.undo_refused()
    tree = await read_page(session, ids)
    page, ids.shown = session.page, tree.ids
    tabs = []
    for i, tab in enumerate(session.context.pages):
        title = await tab.title()
        tabs.append(f"Tab {i}{' (current)' if tab is page else ''}: {title}")
    lines = [
        "OBSERVATION:",
        " | ".join(tabs),
        tree.text,
        f"URL: {page.url}",
        f"OBJECTIVE: {intent}",
        f"PREVIOUS ACTION: {previous_action}",
    ]
    if session.notes:
        lines.append("NOTE: " + " ".join(dict.fromkeys(session.notes)))
    session.notes = []
    return "\n".join(lines)


async def read_page(session: BrowserSession, ids: ElementIds) -> axtree.AXTree:
    """The current tab's tree. A navigation an action started can show itself late under load
    (after the action's settling stopped looking): one seen while the page was being read is let
    finish and the page read again, with the ``[id]``s handed out by the discarded read taken back."""
    for attempt in range(READS):
        marks, saved = session.marks(), ids.save()
        page = session.page
        tree = await axtree.snapshot(await session.cdp(page), session.viewport, ids.numbering(page))
        if session.marks() == marks or attempt == READS - 1:
            break
        ids.restore(saved)
        await session.settle(marks)
    return tree
