"""WebArena's action grammar, its evaluators' semantics, and the env's parts that need no browser:
the waits for navigations, the [id]s handed out, the sites' shown names."""

from __future__ import annotations

import asyncio

import pytest
from agentgym_webarena.actions import ActionError, parse_action, playwright_keys
from agentgym_webarena.aliases import OriginAliases
from agentgym_webarena.evaluators import TaskConfigError, evaluate, program_html, string_match, url_match
from agentgym_webarena.navigation import COMMIT_PATIENCE, REQUEST_WINDOW, Navigations
from agentgym_webarena.observe import ElementIds


@pytest.mark.parametrize(
    ("text", "kind", "fields"),
    [
        ("click [1744]", "click", {"element": 1744}),
        ("hover [7]", "hover", {"element": 7}),
        ("type [12] [red shoes] [0]", "type", {"element": 12, "text": "red shoes", "enter": False}),
        (
            "type [12] [a [bracketed] text]",
            "type",
            {"element": 12, "text": "a [bracketed] text", "enter": True},
        ),
        ("press [Ctrl+a]", "press", {"text": "Ctrl+a"}),
        ("scroll [down]", "scroll", {"text": "down"}),
        ("scroll up", "scroll", {"text": "up"}),
        ("tab_focus [2]", "tab_focus", {"index": 2}),
        ("goto [http://x.org/a?b=1]", "goto", {"text": "http://x.org/a?b=1"}),
        ("stop [$25.99]", "stop", {"text": "$25.99"}),
        ("stop []", "stop", {"text": ""}),
        ("new_tab", "new_tab", {}),
        ("go_back.", "go_back", {}),
        ("`close_tab`", "close_tab", {}),
    ],
)
def test_actions_parse(text, kind, fields):
    action = parse_action(text)
    assert action.kind == kind
    for key, value in fields.items():
        assert getattr(action, key) == value


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("click 12", "click needs an element id"),
        ("click [abc]", "click needs an element id"),
        ("type [3]", "type needs an element and a text"),
        ("type [3] [x] [2]", "0 (do not press Enter) or 1"),
        ("scroll [left]", "scroll takes"),
        ("fly [3]", "unknown action 'fly'"),
        ("tab_focus [x]", "tab number"),
        ("", "cannot read"),
    ],
)
def test_bad_actions_say_why(text, reason):
    with pytest.raises(ActionError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        parse_action(text)


def test_key_names_follow_playwright():
    assert playwright_keys("Ctrl+Shift+a") == "Control+Shift+a"
    assert playwright_keys("enter") == "Enter" and playwright_keys("Cmd+v") == "Meta+v"


def test_string_match_semantics():
    assert string_match('"$25.99"', {"exact_match": "$25.99"}, "").score == 1
    assert string_match("25.99 dollars", {"exact_match": "$25.99"}, "").score == 0
    assert string_match("It is Jane Doe, I think", {"must_include": ["jane doe"]}, "").score == 1
    # one value: whole words only; several: substrings, all of them
    assert string_match("Janet Doe", {"must_include": ["Jane"]}, "").score == 0
    assert string_match("red, green and blue", {"must_include": ["red", "blue"]}, "").score == 1
    assert string_match("red and green", {"must_include": ["red", "blue"]}, "").score == 0
    assert string_match("N/A", {"fuzzy_match": "N/A"}, "").score == 1
    skipped = string_match("about five", {"fuzzy_match": ["5"]}, "how many?")
    assert skipped.score == 1 and skipped.skipped and not skipped.checks  # no judge: reported, not scored
    judged = string_match(
        "about five", {"fuzzy_match": ["5"]}, "how many?", judge=lambda i, a, r: "five" in a
    )
    assert judged.score == 1 and not judged.skipped


def test_url_match_semantics():
    ref = "http://shop.test/category/books?sort=price_asc"
    assert url_match("http://shop.test/category/books/?sort=price_asc&page=1", ref).score == 1
    assert url_match("http://shop.test/category/books", ref).score == 0  # a query value missing
    assert url_match("http://shop.test/category/toys?sort=price_asc", ref).score == 0
    assert url_match("http://shop.test/b", "http://shop.test/a |OR| http://shop.test/b").score == 1


def test_program_html_and_the_product_of_evaluators():
    pages = {"last": "Order #12 placed", "http://shop.test/orders": "Pending Pending Complete"}

    async def fetch(url, locator):
        return pages[url]

    targets = [
        {
            "url": "last",
            "locator": "document.body.innerText",
            "required_contents": {"must_include": ["order #12"]},
        },
        {
            "url": "http://shop.test/orders",
            "locator": "",
            "required_contents": {"must_include": ["Shipped |OR| Complete"]},
        },
    ]
    assert asyncio.run(program_html(targets, fetch)).score == 1
    targets[1]["required_contents"] = {"exact_match": "Complete"}
    assert asyncio.run(program_html(targets, fetch)).score == 0
    with pytest.raises(TaskConfigError, match="helper functions"):
        asyncio.run(program_html([{"url": "func:shopping_get_latest_order_url()", "locator": ""}], fetch))

    task = {
        "intent": "x",
        "eval": {
            "eval_types": ["string_match", "url_match"],
            "reference_answers": {"exact_match": "12"},
            "reference_url": "http://shop.test/orders",
        },
    }
    assert asyncio.run(evaluate(task, "12", "http://shop.test/orders", fetch)).score == 1
    assert asyncio.run(evaluate(task, "12", "http://shop.test/", fetch)).score == 0  # both must pass
    assert asyncio.run(evaluate(task, "13", "http://shop.test/orders", fetch)).score == 0


# -- the env's parts that need no browser ----------------------------------------------------------
class _Frame:
    def __init__(self, parent: _Frame | None = None):
        self.parent_frame = parent


class _Request:
    def __init__(self, frame: _Frame, navigation: bool = True):
        self.frame, self.navigation = frame, navigation

    def is_navigation_request(self) -> bool:
        return self.navigation


def test_navigations_are_followed_by_their_events():
    async def main() -> None:
        loop = asyncio.get_running_loop()
        nav, top = Navigations(), _Frame()
        before = nav.marks()
        started = loop.time()
        await nav.follow(before)  # nothing started: back once the request window has passed
        waited = loop.time() - started
        # it waited out the window, and not a commit's patience after it (how far past the window
        # it returns is bench/speed/webarena.py's figure: no_navigation_wait_ms, its budget line)
        assert nav.marks() == before and REQUEST_WINDOW - 1e-3 <= waited < COMMIT_PATIENCE, waited
        # a request inside the window, its commit well after it: followed to the commit
        loop.call_later(REQUEST_WINDOW / 5, nav.on_request, _Request(top))
        loop.call_later(REQUEST_WINDOW * 4, nav.on_commit, top)
        await nav.follow(before)
        assert nav.marks() == (1, 1)
        # an iframe's navigations and a page's other requests are not the page's
        child = _Frame(top)
        nav.on_request(_Request(child))
        nav.on_request(_Request(top, navigation=False))
        nav.on_commit(child)
        assert nav.marks() == (1, 1)
        # until(): woken by an event, not by a clock; False when none comes in time
        loop.call_later(0.01, nav.on_commit, top)
        assert await nav.until(lambda: nav.commits == 2, 30.0)
        assert not await nav.until(lambda: nav.commits == 3, 0.01)

    asyncio.run(main())


def test_element_ids_are_stable_and_only_the_latest_view_acts():
    ids, page, other = ElementIds(), object(), object()
    number = ids.numbering(page)
    assert [number(50), number(7), number(50)] == [1, 2, 1]
    assert ids.numbering(other)(50) == 3  # the same node id in another tab is another element
    assert ids.find(1) is None  # not shown yet
    ids.shown = {1, 2}
    assert ids.find(1) == (page, 50) and ids.find(3) is None
    saved = ids.save()
    number(99)
    ids.restore(saved)  # a read thrown away hands its ids back
    assert number(123) == 4


def test_the_bundled_sites_are_read_and_written_under_fixed_names():
    aliases = OriginAliases({"http://127.0.0.1:4100": "http://shopping.test"})
    assert aliases.to_shown("at http://127.0.0.1:4100/cart") == "at http://shopping.test/cart"
    assert aliases.to_shown("http://127.0.0.1:41001/") == "http://127.0.0.1:41001/"  # another port
    assert aliases.to_real("goto [HTTP://Shopping.test/b]") == "goto [http://127.0.0.1:4100/b]"
    assert aliases.to_real("http://shopping.tester/") == "http://shopping.tester/"
    assert OriginAliases().to_shown("x") == "x"
