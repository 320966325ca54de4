"""WebArena's observation: the accessibility tree of what is in the viewport, one line per node,
``[id] role 'name' properties``, indented by depth.

Built from Chromium's own accessibility tree over CDP (``Accessibility.getFullAXTree``; Playwright
dropped ``page.accessibility``) and the layout of ``DOMSnapshot.captureSnapshot`` for the viewport.
A node's ``[id]`` is a number the env gives each element the first time an observation shows it
(``number``), in tree order from 1 on each reset: an element keeps its id for as long as it lives,
and the same actions from the same task give the same ids (Chromium's own backend node ids, which
WebArena shows, depend on timing). The env maps an id back to the element's backend node id.
As in WebArena, ignored and unnamed structural nodes (``generic``, ``none``) are left out with their
children lifted, a text node that repeats its parent's name is dropped, and an element outside the
viewport is not shown.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: structure without a name is left out, its children lifted (WebArena keeps some of these; they
#: cost tokens and say nothing an agent acts on)
SKIP_UNNAMED = frozenset(
    {
        "generic",
        "none",
        "LabelText",
        "paragraph",
        "strong",
        "emphasis",
        "time",
        "listitem",
        "Section",
        "group",
    }
)
NEVER = frozenset({"InlineTextBox", "LineBreak", "ListMarker"})
#: properties worth the agent's attention (WebArena's set less the ones every element has)
SHOWN_PROPERTIES = ("focused", "required", "checked", "selected", "expanded", "disabled", "pressed", "level")
VALUE_ROLES = frozenset({"textbox", "searchbox", "combobox", "spinbutton", "slider"})


@dataclass
class AXTree:
    text: str
    ids: set[int]  # the [id]s shown


async def snapshot(
    cdp: Any, viewport: tuple[int, int], number: Callable[[int], int] = int, *, patience: float = 10.0
) -> AXTree:
    """The page's tree as the agent reads it, once its document has loaded. Chromium updates its
    accessibility tree a little after the DOM: fetched too soon after a navigation, the root is not
    yet named after the document (often it is an empty root) and the same page reads differently.
    Such a tree is fetched again until it agrees with the document's title, or ``patience`` seconds
    pass (a slow page is read as it is): on a loaded CI machine the wait was seen to pass 1 s."""
    deadline = time.monotonic() + patience
    while True:
        title = await _loaded_title(cdp)
        late = time.monotonic() > deadline
        if title is not None or late:
            tree = await cdp.send("Accessibility.getFullAXTree")
            if late or _root_name(tree["nodes"]) == " ".join(title.split()):
                break
        # A poll, not an event wait: nothing tells when the accessibility tree has caught up (CDP's
        # Accessibility.loadComplete needs the domain enabled, which keeps the tree up to date on
        # every change of the page). Rare: the env reads a page once it has loaded.
        await asyncio.sleep(0.02)
    # layout bounds and the scroll offset only: the DOM rects (offset, client and scroll rects of
    # every node) are not read, and leaving them out takes ~1.4 ms and a fifth of the bytes off
    layout = await cdp.send("DOMSnapshot.captureSnapshot", {"computedStyles": []})
    return render(tree["nodes"], _bounds(layout), viewport, _scroll(layout), number)


async def _loaded_title(cdp: Any) -> str | None:
    """The document's title once it has loaded; None while it is still loading (its title may not
    be parsed yet) or is being replaced by a navigation."""
    try:
        answer = await cdp.send(
            "Runtime.evaluate", {"expression": "[document.readyState, document.title]", "returnByValue": True}
        )
        state, title = answer["result"]["value"]
    except Exception:
        return None  # the context went away: a navigation is committing
    return title if state == "complete" else None


def _root_name(nodes: list[dict[str, Any]]) -> str:
    root = next((n for n in nodes if not n.get("parentId")), None)
    return " ".join(str(_value(root.get("name")) or "").split()) if root else ""


def _bounds(layout: dict[str, Any]) -> dict[int, tuple[float, float, float, float]]:
    """backendNodeId -> (x, y, width, height) in document coordinates, for the main document."""
    if not layout.get("documents"):
        return {}
    doc = layout["documents"][0]
    backend = doc["nodes"]["backendNodeId"]
    out = {}
    for index, rect in zip(doc["layout"]["nodeIndex"], doc["layout"]["bounds"], strict=True):
        out[backend[index]] = tuple(rect)
    return out


def _scroll(layout: dict[str, Any]) -> tuple[float, float]:
    if not layout.get("documents"):
        return (0.0, 0.0)
    doc = layout["documents"][0]
    return (float(doc.get("scrollOffsetX", 0.0)), float(doc.get("scrollOffsetY", 0.0)))


def _value(field: Any) -> Any:
    return field.get("value") if isinstance(field, dict) else None


def render(
    nodes: list[dict[str, Any]],
    bounds: dict[int, tuple[float, float, float, float]],
    viewport: tuple[int, int],
    scroll: tuple[float, float] = (0.0, 0.0),
    number: Callable[[int], int] = int,
) -> AXTree:
    """The text of the tree; ``number(backend_node_id)`` gives the [id] shown for an element."""
    walk = _Walk({n["nodeId"]: n for n in nodes}, bounds, viewport, scroll)
    roots = [n["nodeId"] for n in nodes if not n.get("parentId")]
    for root in roots[:1]:
        walk.node(root, 0, "")
    out, shown = [], set()
    for line in walk.lines:
        if line is None:
            continue
        depth, backend, text = line
        if backend is None:
            out.append("\t" * depth + text)
            continue
        shown_id = number(backend)
        shown.add(shown_id)
        out.append("\t" * depth + f"[{shown_id}] {text}")
    return AXTree("\n".join(out), shown)


class _Walk:
    """One walk of the tree, gathering ``lines``: (depth, backend node id or None, "role 'name'
    props") per node kept, numbered by the caller in line order, so ids read top to bottom."""

    def __init__(
        self,
        by_id: dict[str, dict[str, Any]],
        bounds: dict[int, tuple[float, float, float, float]],
        viewport: tuple[int, int],
        scroll: tuple[float, float],
    ):
        self.by_id, self.bounds, self.viewport, self.scroll = by_id, bounds, viewport, scroll
        self.lines: list[tuple[int, int | None, str] | None] = []

    def visible(self, node: dict[str, Any]) -> bool | None:
        """True/False from the node's layout box; None when it has none (judge by children)."""
        rect = self.bounds.get(node.get("backendDOMNodeId", -1))
        if rect is None:
            return None
        (x, y, w, h), (width, height), (left, top) = rect, self.viewport, self.scroll
        if w <= 0 and h <= 0:
            return False
        return x < left + width and x + w > left and y < top + height and y + h > top

    def node(self, node_id: str, depth: int, parent_name: str, parent_seen: bool = True) -> bool:
        """Walk the subtree of ``node_id``; whether any line of it was kept."""
        node = self.by_id.get(node_id)
        if node is None:
            return False
        role = str(_value(node.get("role")) or "")
        name = str(_value(node.get("name")) or "").strip()
        children = node.get("childIds", [])
        if role in NEVER:
            return False
        skip = node.get("ignored") or (role in SKIP_UNNAMED and not name)
        if role == "StaticText" and (not name or name in parent_name):
            skip = True  # the text is already its parent's name
        seen = self.visible(node)
        if seen is None:  # no layout box of its own (an option of a <select>): as its parent
            seen = parent_seen
        if not skip and seen is False and role != "RootWebArea":
            # an element out of view: its subtree may still reach into view (a long list)
            skip = True
        if skip:
            kept = False
            for child in children:
                kept = self.node(child, depth, parent_name, seen) or kept
            return kept
        mark = len(self.lines)
        self.lines.append(None)  # placeholder: written once we know the node stays
        kept_children = False
        for child in children:
            kept_children = self.node(child, depth + 1, name, seen) or kept_children
        if not kept_children and not name and role in ("form", "list", "region", "article"):
            self.lines.pop(mark)
            return False
        backend = node.get("backendDOMNodeId")
        self.lines[mark] = (depth, int(backend) if backend is not None else None, _describe(node, role, name))
        return True


def _describe(node: dict[str, Any], role: str, name: str) -> str:
    """``role 'name' properties`` of a node."""
    props = []
    value = _value(node.get("value"))
    if role in VALUE_ROLES and value not in (None, ""):
        props.append(f"value: {str(value)!r}")
    for prop in node.get("properties", []):
        if prop.get("name") in SHOWN_PROPERTIES and (prop["name"] != "level" or role == "heading"):
            v = _value(prop.get("value"))
            if v not in (None, False, "false"):
                props.append(f"{prop['name']}: {v}")
    return f"{role} {name!r}" + ("" if not props else " " + " ".join(props))
