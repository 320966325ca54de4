"""Pages from templates: the Jinja environment (autoescaped), its filters, and :func:`render`.

Templates are autoescaped, whatever their name; pages never mark data as safe.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse

TEMPLATES = Path(__file__).parent / "templates"


def money(value: Any, digits: int = 2) -> str:
    """``1234.5`` -> ``1,234.50``; None (or NaN) -> an em dash."""
    if value is None or isinstance(value, bool):
        return "—" if value is None else str(value)
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    if not math.isfinite(number):
        return "—"
    return f"{number:,.{digits}f}"


def pct(value: Any, digits: int = 1) -> str:
    """A rate as a percentage: ``0.25`` -> ``25.0%``."""
    if value is None:
        return "—"
    try:
        return f"{float(value) * 100:.{digits}f}%"
    except (TypeError, ValueError):
        return str(value)


def num(value: Any) -> str:
    """A count or measurement for a table cell: ints with separators, floats to 4 significant digits."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return "—" if not math.isfinite(value) else f"{value:,.4g}"
    return str(value)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,  # every template, whatever its name: data never reaches a page unescaped
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.Undefined,
    )
    env.filters.update(money=money, pct=pct, num=num)
    # jinja2's own tojson escapes <, >, & and ' for HTML; these make it take paths and dates too
    env.policies["json.dumps_kwargs"] = {"sort_keys": True, "default": str, "ensure_ascii": False}
    return env


templates = _environment()


def render(request: Request, template_name: str, status_code: int = 200, **ctx: Any) -> HTMLResponse:
    """Render ``templates/<template_name>`` (autoescaped) with ``request`` and ``ctx``."""
    html = templates.get_template(template_name).render(request=request, **ctx)
    return HTMLResponse(html, status_code=status_code)


def error_page(request: Request, status: int, detail: str, title: str | None = None) -> HTMLResponse:
    """The error page: ``status``, a title (by default the status's own words) and ``detail``."""
    titles = {400: "Bad request", 404: "Not found", 405: "Method not allowed"}
    title = title or titles.get(status, "Error")
    return render(request, "error.html", status_code=status, status=status, title=title, detail=detail)
