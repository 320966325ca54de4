"""What the question generator reads from the Wikipedia leads, before asking anything: people's
nationalities, countries' capitals, works' makers ("directed by ..."), and the passages that state
each of them.

Each fact is read by a pattern from an article's first sentence (a capital also from "Its capital is
..." anywhere in a country's lead) and kept only with a passage of the article that contains it, so
a question built on it can cite its proof. ``generate.py`` turns the facts into questions.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator

from agentgym_search.corpus import Corpus, contains_answer, read_articles

ROLES = {
    "written": "author",
    "authored": "author",
    "directed": "director",
    "composed": "composer",
    "painted": "painter",
    "sculpted": "sculptor",
    "founded": "founder",
    "designed": "designer",
    "invented": "inventor",
    "discovered": "discoverer",
    "developed": "developer",
    "created": "creator",
    "produced": "producer",
    "built": "builder",
    "proposed": "proposer",
}
#: adjectives of faith or of a group, not of a country: never a nationality
NOT_NATIONALITIES = frozenset(
    "Christian Muslim Jewish Catholic Protestant Buddhist Hindu Islamic Orthodox Roman-Catholic "
    "Reformed Sunni Shia Anglican Lutheran Classical Greco-Roman Renaissance Baroque Romantic".split()
)
_FIRST_SENTENCE = re.compile(r"^(.+?[.!?])(?:\s|$)", re.S)
_NATIONALITY = re.compile(
    r"\b(is|was) (?:an?|the) (?:former |ancient |medieval |modern )?"
    r"((?:[A-Z][a-z]+-)?[A-Z][a-z]+)(?=,? [a-z])"
)
_ROLE = re.compile(r"\b(" + "|".join(ROLES) + r") by ")
_COUNTRY = re.compile(
    r"\b(?:is|was) (?:an?|the) (?:[a-z-]+ ){0,4}?(?:country|sovereign state|city-state|nation)\b"
)
_CAPITAL_OF = re.compile(
    r"^(.+?) is the (?:[a-z]+ )?capital(?: city)?(?: and (?:the )?(?:largest|most populous) city)? of (.+?)[,.]"
)
_ITS_CAPITAL = re.compile(
    r"\b(?:[Ii]ts|[Tt]he country's|[Tt]he) capital(?: city)?(?: and (?:the )?(?:largest|most populous) city)? is "
    r"((?:[A-Z][\w'-]+)(?: [A-Z][\w'-]+){0,3})"
)


def first_sentence(text: str) -> str:
    m = _FIRST_SENTENCE.match(text.strip())
    return m.group(1) if m else text.strip()


def plain_title(title: str) -> str:
    """``Jaws (film)`` -> ``Jaws``."""
    return re.sub(r"\s*\([^)]*\)$", "", title).strip()


class Facts:
    """The facts of ``articles`` (the embedded leads by default), with their passages in ``corpus``."""

    def __init__(self, corpus: Corpus | None = None, articles: list[dict] | None = None):
        self.articles = articles if articles is not None else list(read_articles())
        self.corpus = corpus or Corpus.embedded()
        self.by_title = {a["title"]: a for a in self.articles}
        self.passages_of = self.corpus.by_title
        self.proper_words = self._proper_words()
        self.nationality = self._nationalities()
        #: country titles: places whose lead's first sentence calls them a country
        self.countries = {
            a["title"]
            for a in self.articles
            if a["topic"] == "Geography" and _COUNTRY.search(first_sentence(a["extract"]))
        }
        self.capital = self._capitals()

    def _proper_words(self) -> set[str]:
        """Words capitalised mid-sentence more often than written in lower case (names, Christian)."""
        lower: Counter[str] = Counter()
        upper: Counter[str] = Counter()
        for a in self.articles:
            words = a["extract"].split()
            for prev, w in zip(words, words[1:], strict=False):
                w = w.strip(".,;:()\"'")
                if not w.isalpha() or prev.endswith((".", "!", "?")):
                    continue
                (upper if w[0].isupper() else lower)[w.lower()] += 1
        return {w for w in upper if upper[w] > lower[w]}

    def passage_with(self, title: str, text: str) -> int | None:
        """The first passage of ``title``'s article that contains ``text`` as whole words."""
        for i in self.passages_of.get(title, ()):
            if contains_answer(self.corpus.passages[i].text, text):
                return i
        return None

    def _nationalities(self) -> dict[str, tuple[str, str, int]]:
        """person title -> (adjective, tense, passage)"""
        found = {}
        for a in self.articles:
            if a["topic"] != "People":
                continue
            m = _NATIONALITY.search(first_sentence(a["extract"]))
            if m and m.group(2) not in NOT_NATIONALITIES:
                found[a["title"]] = (m.group(2), m.group(1))
        common = Counter(adj for adj, _ in found.values())
        out = {}
        for title, (adj, tense) in found.items():
            passage = self.passage_with(title, adj)
            if common[adj] >= 3 and passage is not None:
                out[title] = (adj, tense, passage)
        return out

    def _capitals(self) -> dict[str, tuple[str, int]]:
        """country title -> (capital, passage stating it)"""
        out: dict[str, tuple[str, int]] = {}
        for a in self.articles:  # "Tokyo is the capital of Japan"
            m = _CAPITAL_OF.match(first_sentence(a["extract"]))
            if m and m.group(2).removeprefix("the ") in self.countries:
                country = m.group(2).removeprefix("the ")
                passage = self.passage_with(a["title"], a["title"])
                if passage is not None and country not in out and plain_title(a["title"]) == a["title"]:
                    out[country] = (a["title"], passage)
        for country in sorted(self.countries - set(out)):  # "Its capital and largest city is Tokyo"
            m = _ITS_CAPITAL.search(self.by_title[country]["extract"])
            if m:
                passage = self.passage_with(country, m.group(1))
                if passage is not None:
                    out[country] = (m.group(1), passage)
        return out

    def role_links(self) -> Iterator[tuple[str, str, str, int]]:
        """(work title, role, person title, passage): "<work> ... directed by <person>"."""
        people = sorted(self.nationality, key=len, reverse=True)  # longest name first
        for a in self.articles:
            if a["topic"] == "People":
                continue
            for m in _ROLE.finditer(a["extract"]):
                after = a["extract"][m.end() : m.end() + 80]
                # "written by English playwright William Shakespeare": skip a few lower-case words
                lead = re.match(r"(?:(?:the |an? )?(?:[A-Z][a-z]+ )?(?:[a-z]+ ){0,3})", after)
                for start in sorted({0, lead.end() if lead else 0}):
                    person = next((p for p in people if after[start:].startswith(p)), None)
                    if person and person != a["title"]:
                        passage = self.passage_with(a["title"], person)
                        if passage is not None:
                            yield a["title"], ROLES[m.group(1)], person, passage
                        break
