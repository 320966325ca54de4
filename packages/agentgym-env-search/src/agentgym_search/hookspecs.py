"""Specs of the search package's own hooks: retrievers and named data sets.

Only the search env and its commands call them, so they are specified here rather than in core:
the search plugin adds them to the plugin manager as it loads (its ``agentgym_add_hookspecs``), and
a plugin implements them with ``@agentgym.hookimpl`` like any hook. Cheap to import: the types are
imported for type checkers only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentgym.hookspecs import hookspec

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from agentgym_search.data import SearchData
    from agentgym_search.retrievers import Retriever


@hookspec
def agentgym_retrievers() -> Mapping[str, Callable[..., Retriever] | str]:
    """Declare retrievers for the search env.

    Called when a search env or ``agentgym search serve-retriever`` first needs a retriever by
    name. Returns a mapping from a name (``bm25``, ``dense``, ``http``, ...) to a factory, or its
    ``"module:attr"`` string, called as ``factory(corpus, **options)`` and returning a
    :class:`agentgym_search.retrievers.Retriever` (``search(queries, k) -> list[list[Hit]]``); a
    factory with ``needs_corpus = False`` gets ``None`` for the corpus (a client of a remote index).
    """


@hookspec
def agentgym_datasets() -> Mapping[str, SearchData | Callable[[], SearchData]]:
    """Declare named data sets for the search env: a corpus with its questions.

    Called when the search env is configured with a data set's name (``AGENTGYM_SEARCH_DATA=name``
    or ``data=name``). Returns a mapping from a name to an
    :class:`agentgym_search.data.SearchData` or a callable returning one.
    """
