"""The question generator of the embedded default: questions whose answers the corpus proves.

Every question is derived from the Wikipedia lead paragraphs themselves, deterministically (no
model, no randomness but a seeded ``random.Random``), as a chain of *hops*. A hop is a sub-question,
its answer, and the passage that states that answer; a question is kept only if every hop's answer
occurs (after SQuAD normalisation) in its passage. The kinds, by hop count:

1 hop
  ``description``  "Who was the Finnish architect and designer (1898–1976)?" -> Alvar Aalto. The clue
                   is the article's Wikidata short description (not in the corpus; only unique ones
                   that do not name the answer); the answer is the article's title.
  ``nationality``  "What was the nationality of Alvar Aalto?" -> Finnish, read from the lead's first
                   sentence ("... was a Finnish architect ..."), for adjectives seen for >= 3 people.
2 hops
  ``bridge-role``     "What was the nationality of the director of Jaws?": Jaws' lead says
                      "directed by Steven Spielberg" (a person with an article), whose lead says
                      "American".
  ``bridge-capital``  "What is the capital of the country where Mount Fuji is located?": the place's
                      first sentence names one country ("... in Japan"), and some lead states that
                      country's capital ("Tokyo is the capital ... of Japan", "Its capital is ...").
  ``comparison``      "Which of these people was Finnish: Alvar Aalto or Stanley Kubrick?": two
                      people of different nationalities; the answer is a title.
3 hops
  ``comparison-bridge``  "Which of these people was American: the director of Jaws or Alvar Aalto?"

Limits, stated in the README: the relations are the few a pattern reads reliably from a first
sentence; a description can fit another article than its own (a wrong but plausible answer is then
scored wrong); the nationality is the lead's first adjective, which for a few people is an ethnicity
or an empire rather than a citizenship.

The facts a question rests on (nationalities, capitals, makers of works, and the passages stating
them) are read in ``facts.py``; this module asks the questions and writes the data set.
"""

from __future__ import annotations

import gzip
import json
import random
import re
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentgym_search.corpus import Corpus, contains_answer
from agentgym_search.facts import Facts, first_sentence, plain_title

SEED = 0
#: test questions per kind (the rest of each kind, up to ``TRAIN_CAP``, is the train split)
TEST_QUOTA = {
    "1hop-description": 120,
    "1hop-nationality": 60,
    "2hop-bridge-role": 40,
    "2hop-bridge-capital": 60,
    "2hop-comparison": 60,
    "3hop-comparison-bridge": 40,
}
TRAIN_CAP = {"2hop-comparison": 1500, "3hop-comparison-bridge": 800}
DATASET_PREFIX = "wikilead-"

_TYPE_HINTS = ("film", "novel", "play", "opera", "painting", "album", "song", "poem", "sculpture", "book")


@dataclass(frozen=True)
class Hop:
    question: str
    answer: str
    passage: int  # index in the corpus

    def to_json(self, corpus: Corpus) -> dict:
        return {
            "question": self.question,
            "answer": self.answer,
            "passage_id": corpus.passages[self.passage].id,
        }


@dataclass(frozen=True)
class Question:
    kind: str
    question: str
    answers: tuple[str, ...]
    hops: tuple[Hop, ...]

    def to_json(self, corpus: Corpus) -> dict:
        return {
            "question": self.question,
            "golden_answers": list(self.answers),
            "dataset": DATASET_PREFIX + self.kind,
            "hops": [h.to_json(corpus) for h in self.hops],
        }


def named(title: str) -> str:
    """How a question names an article: ``Jaws (film)`` -> ``the film Jaws``."""
    m = re.match(r"^(.*) \(([^)]*)\)$", title)
    if m:
        kind = m.group(2).split()[-1].lower()
        if kind in _TYPE_HINTS:
            return f"the {m.group(2).lower()} {m.group(1)}"
        return m.group(1)
    return title


def answers_for(title: str) -> tuple[str, ...]:
    plain = plain_title(title)
    return (title,) if plain == title else (title, plain)


class Generator:
    """The questions asked of the facts of ``articles`` (the embedded leads by default), each hop
    citing a passage of ``corpus``."""

    def __init__(self, corpus: Corpus | None = None, articles: list[dict] | None = None):
        self.facts = Facts(corpus, articles)
        self.corpus = self.facts.corpus

    # -- questions --------------------------------------------------------------------------------
    @staticmethod
    def tense(article: dict) -> str:
        """``is`` or ``was``, as the lead's first sentence says it."""
        m = re.search(r"\b(is|was|are|were)\b", first_sentence(article["extract"]))
        return "was" if m and m.group(1) in ("was", "were") else "is"

    def clue(self, description: str) -> str:
        first, _, rest = description.partition(" ")
        parts = first.split("-")
        if all(
            p.isalpha() and p.lower() not in self.facts.proper_words and not p[1:].isupper() for p in parts
        ):
            first = (
                first.lower()
            )  # "Curdled milk food product" -> "the curdled milk ..."; "German-British" stays
        return f"{first} {rest}".strip()

    def description_questions(self) -> Iterator[Question]:
        counts = Counter(a["description"] for a in self.facts.articles)
        for a in self.facts.articles:
            desc, title = a["description"].strip(), a["title"]
            if counts[a["description"]] != 1 or len(desc.split()) < 3 or not desc[0].isupper():
                continue
            title_words = {w.lower() for w in re.findall(r"\w{3,}", plain_title(title))}
            if title_words & {w.lower() for w in re.findall(r"\w{3,}", desc)} or desc.startswith("In "):
                continue  # the clue would name the answer
            passage = self.facts.passage_with(title, title)
            if passage is None:
                continue
            clue = self.clue(desc)
            if a["topic"] == "People":
                q = f"Who {self.tense(a)} the {clue}?"
            elif a["topic"] == "Geography":
                q = f"Which place is the {clue}?"
            else:
                q = f"What is the {clue}?"
            yield Question("1hop-description", q, answers_for(title), (Hop(q, title, passage),))

    def nationality_question(self, person: str) -> tuple[str, Hop]:
        adj, tense, passage = self.facts.nationality[person]
        q = f"What {tense} the nationality of {person}?"
        return q, Hop(q, adj, passage)

    def nationality_questions(self) -> Iterator[Question]:
        for person in self.facts.nationality:
            q, hop = self.nationality_question(person)
            yield Question("1hop-nationality", q, (hop.answer,), (hop,))

    def bridge_role_questions(self) -> Iterator[Question]:
        seen = set()
        for work, role, person, passage in self.facts.role_links():
            if (work, role) in seen:
                continue
            seen.add((work, role))
            adj, tense, p2 = self.facts.nationality[person]
            first = Hop(f"Who is the {role} of {named(work)}?", person, passage)
            _, second = self.nationality_question(person)
            q = f"What {tense} the nationality of the {role} of {named(work)}?"
            yield Question("2hop-bridge-role", q, (adj,), (first, second))

    def bridge_capital_questions(self) -> Iterator[Question]:
        countries = sorted(self.facts.capital, key=len, reverse=True)
        for a in self.facts.articles:
            if a["topic"] != "Geography" or a["title"] in self.facts.countries:  # a place in a country
                continue
            sentence = first_sentence(a["extract"])
            named_countries = [
                c
                for c in countries
                if re.search(
                    rf"\b(?:in|of) (?:[A-Z][\w-]+(?: [A-Z][\w-]+)*, )?(?:the )?{re.escape(c)}\b", sentence
                )
            ]
            if len(named_countries) != 1:
                continue
            country = named_countries[0]
            capital, cap_passage = self.facts.capital[country]
            if plain_title(a["title"]) == capital:
                continue
            passage = self.facts.passage_with(a["title"], country)
            if passage is None:
                continue
            place = named(a["title"])
            first = Hop(f"In which country is {place}?", country, passage)
            second = Hop(f"What is the capital of {country}?", capital, cap_passage)
            q = f"What is the capital of the country where {place} is located?"
            yield Question("2hop-bridge-capital", q, answers_for(capital), (first, second))

    def comparison_questions(self, rng: random.Random, n: int) -> Iterator[Question]:
        people = sorted(self.facts.nationality)
        seen = set()
        for _ in range(n * 20):
            if len(seen) >= n:
                return
            p1, p2 = rng.sample(people, 2)
            adj1, adj2 = self.facts.nationality[p1][0], self.facts.nationality[p2][0]
            if adj1 == adj2 or (p1, p2) in seen or (p2, p1) in seen:
                continue
            seen.add((p1, p2))
            tense = self.facts.nationality[p1][1]
            a, b = (p1, p2) if rng.random() < 0.5 else (p2, p1)
            q = f"Which of these people {tense} {adj1}: {a} or {b}?"
            hops = (self.nationality_question(p1)[1], self.nationality_question(p2)[1])
            yield Question("2hop-comparison", q, answers_for(p1), hops)

    def comparison_bridge_questions(self, rng: random.Random, n: int) -> Iterator[Question]:
        links = sorted({(w, r, p, s) for w, r, p, s in self.facts.role_links()})
        people = sorted(self.facts.nationality)
        seen = set()
        for _ in range(n * 20):
            if len(seen) >= n or not links:
                return
            work, role, person, passage = links[rng.randrange(len(links))]
            other = people[rng.randrange(len(people))]
            adj, tense, _ = self.facts.nationality[person]
            if self.facts.nationality[other][0] == adj or (work, role, other) in seen:
                continue
            seen.add((work, role, other))
            clue = f"the {role} of {named(work)}"
            a, b = (clue, other) if rng.random() < 0.5 else (other, clue)
            q = f"Which of these people {tense} {adj}: {a} or {b}?"
            hops = (
                Hop(f"Who is the {role} of {named(work)}?", person, passage),
                self.nationality_question(person)[1],
                self.nationality_question(other)[1],
            )
            yield Question("3hop-comparison-bridge", q, answers_for(person), hops)

    # -- the data set -----------------------------------------------------------------------------
    def generate(self) -> dict[str, list[Question]]:
        """``{"test": [...], "train": [...]}``, each sorted by kind (so a kind's task ids are one range)."""
        rng = random.Random(SEED)
        pools = {
            "1hop-description": list(self.description_questions()),
            "1hop-nationality": list(self.nationality_questions()),
            "2hop-bridge-role": list(self.bridge_role_questions()),
            "2hop-bridge-capital": list(self.bridge_capital_questions()),
            "2hop-comparison": list(self.comparison_questions(rng, 2 * TRAIN_CAP["2hop-comparison"])),
            "3hop-comparison-bridge": list(
                self.comparison_bridge_questions(rng, 2 * TRAIN_CAP["3hop-comparison-bridge"])
            ),
        }
        test: list[Question] = []
        train: list[Question] = []
        for kind, pool in pools.items():
            pool = [q for q in pool if self.proven(q)]
            pool = list({q.question: q for q in pool}.values())  # one question text, one entry
            rng.shuffle(pool)
            k = min(TEST_QUOTA[kind], len(pool) // 2)
            test += pool[:k]
            train += pool[k : k + TRAIN_CAP.get(kind, len(pool))]
        return {"test": test, "train": train}

    def proven(self, q: Question) -> bool:
        """Every hop's answer is in its passage, and a gold answer is in the last hop's passage or is
        the title of a passage's article (comparisons answer with a name)."""
        passages = self.corpus.passages
        if not all(contains_answer(passages[h.passage].contents, h.answer) for h in q.hops):
            return False
        return any(contains_answer(passages[h.passage].contents, a) for h in q.hops for a in q.answers)


def describe(questions: dict[str, list[Question]]) -> dict[str, dict[str, int]]:
    """split -> category (the ``dataset`` field) -> count, in file order."""
    out: dict[str, dict[str, int]] = defaultdict(dict)
    for split, qs in questions.items():
        for kind, n in Counter(DATASET_PREFIX + q.kind for q in qs).items():
            out[split][kind] = n
    return dict(out)


def write(questions: dict[str, list[Question]], corpus: Corpus, out_dir: Path) -> dict[str, Any]:
    """``questions_{split}.jsonl.gz`` (byte-identical for the same input: no gzip timestamp) and
    ``meta.json`` (split sizes by category, read when plugins load)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for split, qs in questions.items():
        qs = sorted(qs, key=lambda q: list(TEST_QUOTA).index(q.kind))  # stable: a kind is one id range
        questions[split] = qs
        with gzip.GzipFile(out_dir / f"questions_{split}.jsonl.gz", "wb", mtime=0) as f:
            for i, q in enumerate(qs):
                row = {"id": f"{split}_{i}", **q.to_json(corpus)}
                f.write((json.dumps(row, ensure_ascii=False) + "\n").encode())
    meta = {"corpus_digest": corpus.digest, "seed": SEED, "splits": describe(questions)}
    (out_dir / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    return meta
