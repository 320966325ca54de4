"""Action parsers on messy, real-world model output.

The contract under test: a parser finds the action in the text and strips the *decoration* around it
(markdown, quotes, template brackets, trailing punctuation) but never rewrites the action's words.
"""

from __future__ import annotations

import pytest

from agentgym.parsers import (
    PARSERS,
    ParseResult,
    clean_action,
    get_parser,
    make_tags_parser,
    parse_action,
    parse_fenced,
    parse_plain,
    parse_react,
    parse_tags,
)

# ---------------------------------------------------------------------------------------------
# ParseResult
# ---------------------------------------------------------------------------------------------


def test_parse_result_ok_follows_action():
    assert ParseResult("go to x").ok
    assert not ParseResult(None, "Format error: ...").ok
    # An empty string is still an action the parser chose to return; only None means "no action".
    assert ParseResult("").ok


# ---------------------------------------------------------------------------------------------
# react: "Thought: ... Action: <action>"
# ---------------------------------------------------------------------------------------------

REACT_CASES = [
    pytest.param("Thought: the ball is ahead.\nAction: go to red ball 1", "go to red ball 1", id="canonical"),
    # Models keep going and hallucinate the next turns; only the first Action is the real one.
    pytest.param(
        "Thought: go.\nAction: go to red ball 1\nObservation: You see a key.\nThought: now the key.\nAction: pickup key",
        "go to red ball 1",
        id="several-actions-first-wins",
    ),
    pytest.param("Action: open door\n\nAction: go to door", "open door", id="two-action-lines"),
    # The label on its own line, the action on the next non-empty line.
    pytest.param("Thought: hmm\nAction:\ngo to red ball 1\n", "go to red ball 1", id="label-alone"),
    pytest.param(
        "Thought: hmm\nAction:\n\n   go to red ball 1   \nmore text",
        "go to red ball 1",
        id="label-alone-blank",
    ),
    pytest.param(
        "Action: go to x\nI think this gets me closer to the goal.", "go to x", id="trailing-text-lines"
    ),
    # Markdown around the label and around the action.
    pytest.param("**Action:** go to x", "go to x", id="bold-label-colon-inside"),
    pytest.param("**Action**: go to x", "go to x", id="bold-label-colon-outside"),
    pytest.param("*Action:* go to x", "go to x", id="italic-label"),
    pytest.param("__Action:__ go to x", "go to x", id="underscore-bold-label"),
    pytest.param("Action: `go to x`", "go to x", id="inline-code"),
    pytest.param("Action: **pickup red ball 1**", "pickup red ball 1", id="bold-action"),
    pytest.param("Action: **go to x**.", "go to x", id="bold-action-then-period"),
    pytest.param("Action: `go to x`.", "go to x", id="code-action-then-period"),
    pytest.param("- Action: toggle", "toggle", id="bullet-label"),
    pytest.param("> Action: toggle", "toggle", id="blockquote-label"),
    pytest.param("### Action: toggle", "toggle", id="heading-label"),
    # Label spelling.
    pytest.param("ACTION: go to x", "go to x", id="upper-case-label"),
    pytest.param("action : go to x", "go to x", id="lower-case-space-before-colon"),
    pytest.param("Action：go to x", "go to x", id="full-width-colon"),
    pytest.param("Action 2: go to x", "go to x", id="numbered-label"),
    # Trailing sentence punctuation the model adds as if writing prose.
    pytest.param("Action: go to red ball 1.", "go to red ball 1", id="trailing-period"),
    pytest.param("Action: go to x!", "go to x", id="trailing-exclamation"),
    pytest.param("Action: go to x!!", "go to x", id="trailing-double-exclamation"),
    # Quotes around the whole action.
    pytest.param('Action: "go to x"', "go to x", id="double-quotes"),
    pytest.param("Action: 'go to x'", "go to x", id="single-quotes"),
    pytest.param("Action: “go to x”", "go to x", id="curly-quotes"),
    # The prompt said "Action: <action>" and the model copied the brackets.
    pytest.param("Action: <go to door>", "go to door", id="template-brackets"),
    pytest.param('Action: "<go to door>".', "go to door", id="template-brackets-quoted-period"),
    # Whitespace inside the action is normalised, words are not.
    pytest.param("Action:   go   to \t x  ", "go to x", id="inner-whitespace"),
    # Windows line endings.
    pytest.param("Thought: a\r\nAction: go to x\r\nObservation: b", "go to x", id="crlf"),
    pytest.param("Action:\r\ngo to x\r\n", "go to x", id="crlf-label-alone"),
    # A dangling bold marker after the label, the action on the next line.
    pytest.param("Action: **\ngo to x", "go to x", id="dangling-bold-then-next-line"),
    # The action fenced in a code block under the label (fence lines are skipped, language too).
    pytest.param("Action:\n```\ngo to x\n```", "go to x", id="fenced-block-after-label"),
    pytest.param("Action: ```python\ngo to x\n```", "go to x", id="fence-opens-on-label-line"),
    pytest.param("Action: ```go to x```", "go to x", id="inline-triple-backticks"),
    # "action:" inside a Thought is prose, not the label: the label must start its line.
    pytest.param(
        "Thought: the best action: go to x\nAction: turn left", "turn left", id="action-word-in-prose"
    ),
]


@pytest.mark.parametrize(("text", "expected"), REACT_CASES)
def test_react_finds_action(text, expected):
    result = parse_react(text)
    assert result == ParseResult(expected)
    assert result.ok and result.error is None


@pytest.mark.parametrize(
    "action",
    [
        # The parser never rewrites words: both spellings pass through as written; the env decides.
        "pick up red ball 1",
        "pickup red ball 1",
        "click [3]",
        "search[wireless mouse under 20 dollars]",
        "type [164] [restaurants near CMU] [1]",
        "think: I need the key first",  # a colon inside the action is kept
        "wait...",  # an ellipsis is not "trailing punctuation"
        'say "hello"',  # a quote that closes an inner quotation is not a wrapper
        "SELECT name FROM users WHERE name = 'Bob'",
        "run `ls`",
        "use _item_",
        "open Bob's door",
        "Go To Red Ball 1",  # case is kept
    ],
)
def test_react_passes_action_words_through_unchanged(action):
    assert parse_react(f"Thought: ok.\nAction: {action}").action == action


def test_react_pick_up_and_pickup_stay_distinct():
    a = parse_react("Action: pick up the key").action
    b = parse_react("Action: pickup the key").action
    assert (a, b) == ("pick up the key", "pickup the key")


@pytest.mark.parametrize(
    "text",
    [
        "Thought: I will go to the red ball.",
        "",
        "   \n\n",
        "I should go to x next.",
        "Next action: go to x",  # "action" must be the label itself
        "Actions: go to x",
    ],
)
def test_react_without_label_is_a_format_error_that_teaches_the_format(text):
    result = parse_react(text)
    assert result.action is None
    assert not result.ok
    assert result.error is not None
    # The error is sent back to the model: it must show the expected format.
    assert "Action:" in result.error
    assert "Format error" in result.error


@pytest.mark.parametrize(
    "text",
    [
        "Action:",
        "Action:   ",
        "Thought: hm\nAction: **",
        "Action: ``",
        # Only a label, then the model moves on to another section: there is no action to take.
        "Action:\nThought: I am not sure\ngo to x",
        "Action:\n\nObservation: nothing happens",
        "Action:\n```\n```",
    ],
)
def test_react_empty_action_is_a_format_error(text):
    result = parse_react(text)
    assert result.action is None
    assert result.error is not None and "Action:" in result.error
    # A different message from "no label at all": the model did write the label.
    assert result.error != parse_react("no label here").error


# ---------------------------------------------------------------------------------------------
# clean_action
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("  go to x  ", "go to x"),
        ("**go to x**", "go to x"),
        ("**go to x*", "go to x"),  # unbalanced emphasis: the marks are still decoration
        ("go to x**", "go to x"),
        ('"go to x"', "go to x"),
        ('“go to x"', "go to x"),  # a curly and a straight quote of the same kind
        ("<go to door>", "go to door"),
        ("<go to door>.", "go to door"),
        ("**<go to door>**", "go to door"),
        ("<a> and <b>", "<a> and <b>"),  # not one bracketed template
        ("go to x.", "go to x"),
        ("go to x;", "go to x"),
        ("go to x?", "go to x"),
        ("go to x。", "go to x"),
        ("wait...", "wait..."),
        ("", ""),
        ("**", ""),
        ("`", ""),
    ],
)
def test_clean_action(raw, expected):
    assert clean_action(raw) == expected


# ---------------------------------------------------------------------------------------------
# tags: <search>q</search> / <answer>a</answer>
# ---------------------------------------------------------------------------------------------

TAGS_CASES = [
    pytest.param("<search>capital of France</search>", "<search>capital of France</search>", id="search"),
    pytest.param("<answer>Paris</answer>", "<answer>Paris</answer>", id="answer"),
    pytest.param(
        "<think>I need to look this up.</think>\n<search>capital of France</search>",
        "<search>capital of France</search>",
        id="after-think",
    ),
    # The tag name is case-insensitive; the result is canonical lower case.
    pytest.param("<SEARCH>x</SEARCH>", "<search>x</search>", id="upper-case-tag"),
    pytest.param("<Search>x</search>", "<search>x</search>", id="mixed-case-tag"),
    # Whitespace inside the tag brackets and inside the content.
    pytest.param(
        "< search >  capital   of  France  </ search >", "<search>capital of France</search>", id="spaces"
    ),
    pytest.param(
        "<answer>line one\nline two</answer>", "<answer>line one line two</answer>", id="multi-line"
    ),
    # The first complete tag wins, whichever tag it is.
    pytest.param("<answer>a</answer><search>b</search>", "<answer>a</answer>", id="answer-first"),
    pytest.param("<search>a</search><answer>b</answer>", "<search>a</search>", id="search-first"),
    pytest.param(
        "<search>first</search> then <search>second</search>", "<search>first</search>", id="same-twice"
    ),
    pytest.param("<search>unfinished <answer>b</answer>", "<answer>b</answer>", id="first-complete"),
    # Generation stops on the closing tag (it is the stop sequence), so the tag is left open.
    pytest.param("<search>open at end", "<search>open at end</search>", id="open-at-end"),
    pytest.param("I think <answer>Paris\n\n", "<answer>Paris</answer>", id="open-at-end-trailing-newlines"),
    # Or generation is cut off (max tokens) in the middle of the closing tag.
    pytest.param("<search>q</search", "<search>q</search>", id="closing-tag-cut-off"),
    pytest.param("<answer>Paris</ans", "<answer>Paris</answer>", id="closing-tag-cut-short"),
    pytest.param("<search>q<", "<search>q</search>", id="closing-tag-cut-at-lt"),
    pytest.param("<answer>x < y", "<answer>x < y</answer>", id="lt-in-content-kept"),
    # Unknown tags are ignored.
    pytest.param("<foo>x</foo><search>q</search>", "<search>q</search>", id="unknown-tag-ignored"),
]


@pytest.mark.parametrize(("text", "expected"), TAGS_CASES)
def test_tags_finds_action(text, expected):
    assert parse_tags(text) == ParseResult(expected)


@pytest.mark.parametrize(
    "text", ["<search></search>", "<search>   \n </search>", "<answer></answer> <search>q</search>"]
)
def test_tags_empty_tag_is_an_error_naming_the_tag(text):
    result = parse_tags(text)
    assert result.action is None
    tag = "answer" if text.startswith("<answer>") else "search"
    assert result.error is not None and f"<{tag}>" in result.error and "empty" in result.error


@pytest.mark.parametrize("text", ["no tags at all", "<foo>x</foo>", "<search>q</answer>", ""])
def test_tags_missing_is_an_error_listing_the_tags(text):
    result = parse_tags(text)
    assert result.action is None
    assert result.error is not None
    assert "<search>...</search>" in result.error and "<answer>...</answer>" in result.error


def test_make_tags_parser_with_custom_tags():
    parse = make_tags_parser(("tool", "finish"))
    assert parse("<tool>ls -la</tool>") == ParseResult("<tool>ls -la</tool>")
    assert parse("<FINISH>done</FINISH>") == ParseResult("<finish>done</finish>")
    assert parse("<finish>done") == ParseResult("<finish>done</finish>")
    # The default tags are not known to this parser.
    result = parse("<search>q</search>")
    assert result.action is None
    assert "<tool>...</tool>" in result.error and "<finish>...</finish>" in result.error
    assert "<search>" not in result.error
    assert "tool" in (parse.__doc__ or "")


def test_make_tags_parser_escapes_tag_names():
    parse = make_tags_parser(("a.b",))
    assert parse("<a.b>x</a.b>").action == "<a.b>x</a.b>"
    # "." must match only a literal dot, not any character.
    assert parse("<axb>x</axb>").action is None


# ---------------------------------------------------------------------------------------------
# fenced: the first ``` block
# ---------------------------------------------------------------------------------------------

FENCED_CASES = [
    pytest.param("```\nclick [3]\n```", "click [3]", id="plain-block"),
    # The first line of a block is a language tag when more content follows it.
    pytest.param("```python\nclick [3]\n```", "click [3]", id="language-line-dropped"),
    pytest.param("```c++\nx = 1\n```", "x = 1", id="language-with-symbols"),
    pytest.param("``` \nstop\n```", "stop", id="blank-language-line"),
    pytest.param("```sql\nSELECT 1;\n```", "SELECT 1;", id="content-kept-verbatim"),
    # Alone in the block, a single word is the action itself (e.g. "stop"), not a language tag.
    pytest.param("```stop\n```", "stop", id="single-word-alone-is-the-action"),
    # A first line with spaces is content, not a language tag; lines are joined with spaces.
    pytest.param("```go to x\nnow\n```", "go to x now", id="first-line-with-spaces-kept"),
    pytest.param("```click [12]```", "click [12]", id="inline"),
    pytest.param(
        "Sure, here it is:\n```\nclick [3]\n```\nor maybe ```scroll [down]```",
        "click [3]",
        id="first-block-wins",
    ),
    pytest.param(
        "```\n  type [4]   [hello world]  \n```", "type [4] [hello world]", id="whitespace-normalised"
    ),
]


@pytest.mark.parametrize(("text", "expected"), FENCED_CASES)
def test_fenced_finds_action(text, expected):
    assert parse_fenced(text) == ParseResult(expected)


@pytest.mark.parametrize("text", ["click [3]", "`click [3]`", "```\nclick [3]", ""])
def test_fenced_without_block_is_an_error(text):
    result = parse_fenced(text)
    assert result.action is None
    assert result.error is not None and "```" in result.error


@pytest.mark.parametrize("text", ["``````", "```\n\n```", "```   ```"])
def test_fenced_empty_block_is_an_error(text):
    result = parse_fenced(text)
    assert result.action is None
    assert result.error is not None and "empty" in result.error


# ---------------------------------------------------------------------------------------------
# plain: the first non-empty line
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("go to x", "go to x"),
        ("\n\n  **go to x.**  \nsecond line", "go to x"),
        ("`pickup key`\nbecause it opens the door", "pickup key"),
        # A line that is only decoration is not the first action line.
        ("**\ngo to x", "go to x"),
        ("pick up the key.", "pick up the key"),
    ],
)
def test_plain_first_non_empty_line_cleaned(text, expected):
    assert parse_plain(text) == ParseResult(expected)


@pytest.mark.parametrize("text", ["", "   ", "\n\n  \n", "**\n``"])
def test_plain_empty_reply_is_an_error(text):
    result = parse_plain(text)
    assert result.action is None
    assert result.error is not None and "empty" in result.error


# ---------------------------------------------------------------------------------------------
# registry
# ---------------------------------------------------------------------------------------------


def test_get_parser_known_names():
    assert get_parser("react") is parse_react
    assert get_parser("tags") is parse_tags
    assert get_parser("fenced") is parse_fenced
    assert get_parser("plain") is parse_plain
    assert set(PARSERS) == {"react", "tags", "fenced", "plain"}


def test_get_parser_unknown_name_lists_known():
    with pytest.raises(KeyError) as exc:
        get_parser("xml")
    message = str(exc.value)
    assert "'xml'" in message
    for name in ("react", "tags", "fenced", "plain"):
        assert name in message


def test_parse_action_dispatches_by_name():
    text = "Thought: x\nAction: go to x\n```click [3]```"
    assert parse_action("react", text).action == "go to x"
    assert parse_action("fenced", text).action == "click [3]"
    assert parse_action("plain", text).action == "Thought: x"
    with pytest.raises(KeyError):
        parse_action("nope", text)


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_every_parser_returns_an_error_for_empty_text(name):
    result = get_parser(name)("")
    assert result == ParseResult(None, result.error)
    assert isinstance(result.error, str) and result.error.startswith("Format error")


@pytest.mark.parametrize(
    ("text", "action"),
    [
        # The whole ReAct turn on one line: the capitalised label after a sentence still counts.
        ("Thought: the ball is ahead. Action: go to red ball 1", "go to red ball 1"),
        ("Final Action: go to x", "go to x"),
        ("I am done. **Action:** toggle", "toggle"),
        # A numbered list item.
        ("1. Thought: look\n2. Action: pickup key 1", "pickup key 1"),
    ],
)
def test_react_label_inside_a_line_or_a_list(text, action):
    assert parse_react(text).action == action


@pytest.mark.parametrize(
    "name, action",
    [
        ("react", "go to red ball 1"),
        ("react", "craft 1 stick using 2 oak planks"),
        ("fenced", "click [12]"),
        ("plain", "inventory"),
        ("tags", "<search>who wrote hamlet</search>"),
    ],
)
def test_format_action_round_trips_through_its_parser(name, action):
    from agentgym.parsers import format_action

    assert parse_action(name, format_action(name, action)) == ParseResult(action)


def test_format_action_unknown_parser():
    from agentgym.parsers import format_action

    with pytest.raises(KeyError, match="unknown action parser 'nope'"):
        format_action("nope", "x")


# ---------------------------------------------------------------------------------------------
# match_available: the one listed action a free-text reply names
# ---------------------------------------------------------------------------------------------

BABYAI_ACTIONS = [
    "turn left",
    "turn right",
    "move forward",
    "go to red ball 1",
    "pickup red ball 1",
    "go to red closed door 1",
    "toggle",
    "toggle and go through red closed door 1",
    "check available actions",
]


@pytest.mark.parametrize(
    "text, action",
    [
        ("You can go to the red ball 1.", "go to red ball 1"),  # a small chat model's reply, article and all
        (
            "You can go straight to the red ball 1.",
            "go to red ball 1",
        ),  # SmolLM2's, zero-shot: a word between
        ("I'll turn to the left", "turn left"),
        ("I think I should **Go To  Red Ball 1** now", "go to red ball 1"),
        ("Thought: the ball is ahead.\nI will pickup red ball 1", "pickup red ball 1"),
        ("turn left", "turn left"),
    ],
)
def test_match_available_finds_the_one_action_a_free_text_reply_names(text, action):
    from agentgym.parsers import match_available

    assert parse_react(text).action is None  # the parser alone reads no action here
    assert match_available(text, BABYAI_ACTIONS) == ParseResult(action)


def test_match_available_two_actions_is_an_error_naming_both():
    from agentgym.parsers import match_available

    result = match_available("I could turn left, or move forward instead.", BABYAI_ACTIONS)
    assert result.action is None
    assert '"turn left"' in result.error and '"move forward"' in result.error
    assert "Action: <action>" in result.error


def test_match_available_an_action_inside_a_longer_named_one_gives_way():
    from agentgym.parsers import match_available

    text = "The door is closed, so I toggle and go through red closed door 1."
    assert match_available(text, BABYAI_ACTIONS) == ParseResult("toggle and go through red closed door 1")


def test_match_available_whole_words_only_and_none_named_is_the_parsers_own_error():
    from agentgym.parsers import match_available

    for text in (
        "You can go straight to the red ball.",  # which ball: no number
        "go to red ball 10",
        "I turned leftwards",
        "go and then maybe to red ball 1",  # two words between: not the phrase
        "",
    ):
        assert match_available(text, BABYAI_ACTIONS) == parse_react(text)
    assert match_available("nothing here", ["inventory"], "fenced") == parse_fenced("nothing here")
