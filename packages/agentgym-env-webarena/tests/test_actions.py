"""WebArena's action grammar and its evaluators' semantics (no browser)."""

from __future__ import annotations

import asyncio

import pytest
from agentgym_webarena.actions import ActionError, parse_action, playwright_keys
from agentgym_webarena.evaluators import TaskConfigError, evaluate, program_html, string_match, url_match


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
