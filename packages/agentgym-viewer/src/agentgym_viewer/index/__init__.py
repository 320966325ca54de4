"""The viewer's index: one SQLite row per episode, pointing at its line in its JSON Lines file.

Sources are run directories (``metrics.jsonl`` and/or ``episodes/``), folders holding run
directories, episodes ``.jsonl`` files and evaluation reports (``eval.json``, whose episodes are the
sibling ``eval.episodes.jsonl``). The index lives in ``$AGENTGYM_VIEWER_CACHE`` (default
``~/.cache/agentgym/viewer``), one database per set of sources, so reopening the same folders reads
nothing that did not change: files are keyed by (resolved path, size, mtime), and a file that grew
(a live run appending episodes) is read from where the index stopped. Episode texts stay in their
files; a page reads the one line it shows by its byte offset, and a text search scans the byte
ranges of the rows that pass the other filters.

Nothing outside the given sources ("roots") is read: every path is resolved and checked with
``Path.is_relative_to`` before it is opened, so a symlink pointing elsewhere is ignored.

Layout: ``scan`` finds the sources and reads their files, ``store`` keeps the database in sync with
them, ``runs`` and ``query`` read it, ``core.Index`` puts them together.
"""

from agentgym_viewer.index.core import Index
from agentgym_viewer.index.models import Page, RunInfo
from agentgym_viewer.index.query import KINDS, SEARCH_BUDGET_S, SORTS
from agentgym_viewer.index.runs import PLOT_SUFFIXES
from agentgym_viewer.index.scan import STEP_FILE
from agentgym_viewer.index.store import BATCH, PROBE, REFRESH_EVERY, SCHEMA_VERSION, cache_dir

__all__ = [
    "BATCH",
    "KINDS",
    "PLOT_SUFFIXES",
    "PROBE",
    "REFRESH_EVERY",
    "SCHEMA_VERSION",
    "SEARCH_BUDGET_S",
    "SORTS",
    "STEP_FILE",
    "Index",
    "Page",
    "RunInfo",
    "cache_dir",
]
