"""The embedded data: every test question is answerable from the corpus, the generator made the
shipped files, the splits are sound."""

from __future__ import annotations

import json
from collections import Counter
from importlib import resources

import pytest
from agentgym_search.corpus import Corpus, contains_answer, normalize_answer, split_passages
from agentgym_search.data import embedded_questions, shared_corpus

from agentgym.plugins import get_env_spec


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return shared_corpus("embedded")


def test_every_test_question_has_its_gold_answer_in_a_passage(corpus):
    by_id = {p.id: p for p in corpus.passages}
    questions = embedded_questions("test")
    assert len(questions) >= 300
    for q in questions:
        # each hop's answer is in the passage its derivation names ...
        for hop in q.hops:
            assert contains_answer(by_id[hop["passage_id"]].contents, hop["answer"]), (q.question, hop)
        # ... and a gold answer is in one of them (so in the corpus)
        assert any(
            contains_answer(by_id[h["passage_id"]].contents, a) for h in q.hops for a in q.golden_answers
        ), q.question
        assert 1 <= len(q.hops) <= 3


def test_the_shipped_questions_are_the_generators_output(tmp_path, corpus):
    from agentgym_search.generate import Generator, write

    gen = Generator(corpus=corpus)
    meta = write(gen.generate(), corpus, tmp_path)
    data = resources.files("agentgym_search") / "data"
    for name in ("questions_test.jsonl.gz", "questions_train.jsonl.gz"):
        assert (tmp_path / name).read_bytes() == (data / name).read_bytes(), name
    assert meta == json.loads((data / "meta.json").read_text())
    assert meta["corpus_digest"] == corpus.digest


def test_splits_are_disjoint_sized_and_categorised_by_source_and_hops():
    test, train = embedded_questions("test"), embedded_questions("train")
    assert len(train) >= 2000
    assert not {q.question for q in test} & {q.question for q in train}
    spec = get_env_spec("search")
    assert len(spec.splits["test"]) == len(test) and len(spec.splits["train"]) == len(train)
    cats = Counter(q.dataset for q in test)
    assert spec.splits["test"].category_counts() == dict(cats)
    hops = Counter(c.split("-")[1] for c in cats for _ in range(cats[c]))
    assert set(hops) == {"1hop", "2hop", "3hop"} and hops["2hop"] + hops["3hop"] >= 100
    # a task id's category is its question's source
    for task_id in (0, len(test) - 1, len(test), len(test) + len(train) - 1):
        q = (test + train)[task_id]
        assert spec.category_of(task_id) == q.dataset


def test_passages_are_wiki18_shaped_and_about_100_words(corpus):
    assert len(corpus) > 10_000
    p = corpus.passages[0]
    assert corpus.contents[0] == f'"{p.title}"\n{p.text}'
    sizes = [len(p.text.split()) for p in corpus.passages]
    assert max(sizes) < 400 and sum(s <= 100 for s in sizes) / len(sizes) > 0.95
    assert split_passages("One two. Three four.", words=2) == ["One two.", "Three four."]


@pytest.mark.parametrize(
    ("text", "answer", "found"),
    [
        ("The Eiffel Tower is in Paris.", "paris", True),
        ("The Eiffel Tower is in Paris.", "the  Paris!", True),
        ("Parisian cafes", "Paris", False),  # whole words only
        ("anything", "", False),
    ],
)
def test_answers_are_matched_after_squad_normalisation(text, answer, found):
    assert contains_answer(text, answer) is found
    assert normalize_answer("The  Cat's, hat!") == "cats hat"
