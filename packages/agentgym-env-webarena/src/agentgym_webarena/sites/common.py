"""The per-request ``Context`` both sites' handlers work on: database, form, flash, cookies, pages.

Handlers are plain synchronous functions of a ``Context`` and run on the server's event loop: every
SQLite call is well under a millisecond, and running them one at a time on the loop means no two
requests ever write to the same file at once. A site subclasses ``Context`` with its templates and
what every one of its pages shows around the content (``chrome``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any, ClassVar
from urllib.parse import quote, unquote

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from .errors import HttpError

Handler = Callable[[Any], Response]


def html(body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(body, status_code=status)


class Context:
    """One request: its database connection, parsed form, flash message and cookies to send back."""

    flash_cookie: ClassVar[str] = "flash"
    templates: ClassVar[jinja2.Environment]
    # What the layout shows on an error page answered before there is a Context (an unknown session).
    blank_chrome: ClassVar[dict[str, Any]] = {}

    def __init__(self, request: Request, db: sqlite3.Connection, form: dict[str, str]) -> None:
        self.request = request
        self.db = db
        self.form = form
        self._set_cookies: list[tuple[str, str]] = []
        self._delete_cookies: list[str] = []
        raw = request.cookies.get(self.flash_cookie)
        self.flash: str | None = unquote(raw) if raw else None
        if raw:
            self._delete_cookies.append(self.flash_cookie)

    def query(self, name: str, default: str = "") -> str:
        return self.request.query_params.get(name, default)

    def field(self, name: str, default: str = "") -> str:
        return self.form.get(name, default).strip()

    def set_cookie(self, name: str, value: str) -> None:
        self._set_cookies.append((name, value))
        if name in self._delete_cookies:
            self._delete_cookies.remove(name)

    def delete_cookie(self, name: str) -> None:
        self._delete_cookies.append(name)

    def redirect(self, url: str, flash: str | None = None) -> Response:
        """303 to ``url``, carrying ``flash`` to the next page's role="status" element."""
        if flash:
            self.set_cookie(self.flash_cookie, quote(flash))
        return RedirectResponse(url, status_code=303)

    def apply_cookies(self, response: Response) -> None:
        for name in self._delete_cookies:
            response.delete_cookie(name, path="/")
        for name, value in self._set_cookies:
            response.set_cookie(name, value, path="/", httponly=True, samesite="lax")

    def page_defaults(self) -> dict[str, Any]:
        """The values a page may set, as they are when it does not."""
        return {"page_title": "", "error": None, "query": ""}

    def chrome(self) -> dict[str, Any]:
        """What the layout shows around every page's content (navigation, the signed-in user)."""
        return {}

    def render(self, template: str, status: int = 200, **values: Any) -> Response:
        page = self.templates.get_template(template).render(
            {**self.page_defaults(), **values, **self.chrome(), "flash": self.flash}
        )
        return html(page, status)

    @classmethod
    def error_page(cls, ctx: Context | None, error: HttpError) -> Response:
        """``error`` as a page in the site's layout; ``ctx`` is None when the request never got one."""
        values = {"page_title": error.title, "heading": error.title, "message": error.message}
        if ctx is not None:
            return ctx.render("error.html", error.status, **values)
        page = cls.templates.get_template("error.html").render(
            {"error": None, "query": "", **values, **cls.blank_chrome, "flash": None}
        )
        return html(page, error.status)
