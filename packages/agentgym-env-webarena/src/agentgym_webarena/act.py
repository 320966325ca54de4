"""WebArena's actions (parsed by ``actions.py``) carried out in a session's browser with Playwright,
each answering whether it was valid and, if not, why."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from agentgym_webarena.actions import Action, playwright_keys
from agentgym_webarena.browser import is_closed_error
from agentgym_webarena.observe import ElementIds
from agentgym_webarena.session import BrowserSession
from agentgym_webarena.tasks import origin

ELEMENT_KINDS = ("click", "hover", "type")

# Elements are found by the backend node id shown in the tree; clicks go to the element's centre
# after scrolling it into view, as a person's would (so overlays and disabled elements behave).
_CENTRE = """function() {
  const el = this.nodeType === 3 ? this.parentElement : this;
  el.scrollIntoView({block: 'center', inline: 'center'});
  const r = el.getBoundingClientRect();
  return [r.left + r.width / 2, r.top + r.height / 2, el.tagName];
}"""
_SELECT = """function(label) {
  const el = this.nodeType === 3 ? this.parentElement : this;
  const want = label.trim().toLowerCase();
  const option = [...el.options].find(o => o.label.trim().toLowerCase() === want || o.value.toLowerCase() === want);
  if (!option) return [...el.options].map(o => o.label);
  el.value = option.value;
  el.dispatchEvent(new Event('input', {bubbles: true}));
  el.dispatchEvent(new Event('change', {bubbles: true}));
  return null;
}"""


async def act(session: BrowserSession, ids: ElementIds, action: Action) -> tuple[bool, str]:
    """(valid, what went wrong) of ``action`` (not ``stop``), once what it started has loaded: an
    unknown element or a failed action is told, not raised."""
    if action.kind == "scroll":  # moves no page: nothing to wait for
        sign = 1 if action.text == "down" else -1
        try:
            await session.page.evaluate(f"window.scrollBy(0, {sign} * window.innerHeight * 0.8)")
        except Exception as exc:
            if is_closed_error(exc):
                raise  # the browser is gone: the session's run() reports it lost
            return False, _failure("The action failed", exc)
        return True, ""
    before = session.marks()
    try:
        if action.kind in ELEMENT_KINDS:
            problem = await _on_element(session, ids, action)
        else:
            problem = await _ON_PAGE[action.kind](session, action)
    except Exception as exc:
        if is_closed_error(exc):
            raise
        where = f" on [{action.element}]" if action.kind in ELEMENT_KINDS else ""
        return False, _failure(f"The action{where} failed", exc)
    if problem:
        return False, problem
    await session.settle(before)
    return True, ""


def _failure(what: str, exc: Exception) -> str:
    """``what`` failed, with the first line of Playwright's reason."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return f"{what}: {first[:200]}"


async def _on_element(session: BrowserSession, ids: ElementIds, action: Action) -> str | None:
    element = action.element
    found = ids.find(element) if element is not None else None
    if found is None:
        return (
            f"There is no element [{element}] in the current view. Use an [id] from the latest "
            "observation (scroll to see more of the page)."
        )
    page, backend = found
    if page is not session.page:
        return f"[{element}] is on another tab; use the ids of the current observation."
    cdp = await session.cdp(page)
    node = await cdp.send("DOM.resolveNode", {"backendNodeId": backend})
    object_id = node["object"]["objectId"]
    centre = await cdp.send(
        "Runtime.callFunctionOn",
        {"objectId": object_id, "functionDeclaration": _CENTRE, "returnByValue": True},
    )
    x, y, tag = centre["result"]["value"]
    if action.kind == "hover":
        await page.mouse.move(x, y)
    elif action.kind == "click":
        await page.mouse.click(x, y)
    elif tag == "SELECT":
        options = await _select(cdp, object_id, action.text)
        if options:
            return f"[{element}] has no option {action.text!r}; its options: {', '.join(options)}."
    else:
        await page.mouse.click(x, y)
        await page.keyboard.press("Control+a")
        await page.keyboard.type(action.text)
        if action.enter:
            await page.keyboard.press("Enter")
    return None


async def _select(cdp: Any, object_id: str, label: str) -> list[str] | None:
    """Pick the option of a ``<select>`` labelled ``label``; its options' labels if it has none."""
    picked = await cdp.send(
        "Runtime.callFunctionOn",
        {
            "objectId": object_id,
            "functionDeclaration": _SELECT,
            "arguments": [{"value": label}],
            "returnByValue": True,
        },
    )
    return picked["result"].get("value")


async def _press(session: BrowserSession, action: Action) -> str | None:
    await session.page.keyboard.press(playwright_keys(action.text))
    return None


async def _new_tab(session: BrowserSession, action: Action) -> str | None:
    await session.new_tab()
    return None


async def _tab_focus(session: BrowserSession, action: Action) -> str | None:
    pages = session.context.pages
    index = action.index or 0
    if not 0 <= index < len(pages):
        return f"There is no tab {action.index}: the tabs are 0 to {len(pages) - 1}."
    await session.focus(pages[index])
    return None


async def _close_tab(session: BrowserSession, action: Action) -> str | None:
    if len(session.context.pages) == 1:
        return "This is the last tab; it stays open."
    await session.close_tab()
    return None


async def _goto(session: BrowserSession, action: Action) -> str | None:
    url = action.text
    if not url.startswith(("http://", "https://")):
        return f"goto needs a full http(s) URL, got {url!r}."
    if origin(url) not in session.allowed:
        sites = ", ".join(sorted(session.allowed))
        return f"Navigation to {url} was refused: it is outside this task's sites ({sites})."
    await session.page.goto(url, wait_until="load")
    return None


async def _go_back(session: BrowserSession, action: Action) -> str | None:
    await session.page.go_back(wait_until="load")
    return None


async def _go_forward(session: BrowserSession, action: Action) -> str | None:
    await session.page.go_forward(wait_until="load")
    return None


_ON_PAGE: dict[str, Callable[[BrowserSession, Action], Awaitable[str | None]]] = {
    "press": _press,
    "new_tab": _new_tab,
    "tab_focus": _tab_focus,
    "close_tab": _close_tab,
    "goto": _goto,
    "go_back": _go_back,
    "go_forward": _go_forward,
}
