"""The Jinja2 environment of a site: its template files, the shared ones, and its inline stylesheet.

A site's templates are ``templates/<site>/*.html``; ``templates/common/`` holds what both sites use
(the page skeleton, the search form, the sort links), named ``common/...``. Each site's CSS is
``static/<site>.css``, written into every page's ``<style>`` element rather than linked, so a page
is one request and reads exactly as it did when the CSS lived in Python.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from .formatting import date_time, long_date, money

TEMPLATES_DIR = Path(__file__).parent / "templates"
STATIC_DIR = Path(__file__).parent / "static"


def stylesheet(site: str) -> Markup:
    """The CSS of ``site`` (``static/<site>.css``), trusted as it ships with the package."""
    return Markup((STATIC_DIR / f"{site}.css").read_text(encoding="utf-8"))


def make_templates(site: str, **globals_: Any) -> jinja2.Environment:
    """A Jinja2 environment over ``templates/<site>`` and ``templates``, autoescaping everything."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([TEMPLATES_DIR / site, TEMPLATES_DIR]),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["money"] = money
    env.filters["long_date"] = long_date
    env.filters["date_time"] = date_time
    env.globals.update(stylesheet=stylesheet(site), **globals_)
    return env
