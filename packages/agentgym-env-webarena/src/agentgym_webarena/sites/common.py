"""Plumbing shared by the shop and the forum: per-request database selection, form parsing, flash
messages, cookies, redirects, error pages and the Jinja2 environment.

Each request picks its database by the ``X-AgentGym-Session`` header (Playwright sets it per browser
context as an extra HTTP header). Without the header the request uses the ``default`` copy, opened on
first use, for a person browsing. A header naming a token that ``Databases`` has not opened gets a 404
"Unknown session" page: a typo or a dropped session must not silently land on a fresh database.

Handlers are plain synchronous functions of a ``Context`` and run on the server's event loop: every
SQLite call is well under a millisecond, and running them one at a time on the loop means no two
requests ever write to the same file at once.
"""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Callable
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from .db import Databases

SESSION_HEADER = "x-agentgym-session"
MAX_FORM_BYTES = 256 * 1024


class Redirect(Exception):
    """Raised by a handler to answer with a 303 redirect (e.g. to the login page)."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.url = url


class HttpError(Exception):
    """Raised by a handler to answer with an error page in the site's layout."""

    def __init__(self, status: int, title: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.title = title
        self.message = message


def money(cents: int) -> str:
    """``2499`` -> ``"$24.99"``, ``123456`` -> ``"$1,234.56"``."""
    sign = "-" if cents < 0 else ""
    return f"{sign}${abs(cents) // 100:,}.{abs(cents) % 100:02d}"


def long_date(stamp: str) -> str:
    """``"2023-03-04 19:01:00"`` -> ``"Mar 4, 2023"``."""
    moment = datetime.fromisoformat(stamp)
    return f"{moment:%b} {moment.day}, {moment.year}"


def date_time(stamp: str) -> str:
    """``"2023-03-04 19:01:00"`` -> ``"Mar 4, 2023 at 19:01"``."""
    moment = datetime.fromisoformat(stamp)
    return f"{long_date(stamp)} at {moment:%H:%M}"


def safe_next(target: str | None, default: str) -> str:
    """A redirect target from a ``next`` parameter, if it is a local path (never another host)."""
    if target and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return default


def here(request: Request) -> str:
    """The request's local URL (path and query), what a ``next`` parameter brings the user back to."""
    return request.url.path + (f"?{request.url.query}" if request.url.query else "")


def referer_path(request: Request, default: str) -> str:
    """The local path of the page a form was submitted from (the Referer, if it is this site's)."""
    referer = urlsplit(request.headers.get("referer", ""))
    if referer.netloc and referer.netloc != request.headers.get("host"):
        return default
    return safe_next(referer.path + (f"?{referer.query}" if referer.query else ""), default)


def login_url(path: str, target: str) -> str:
    """``path`` (the login page) with ``next=target``."""
    return f"{path}?{urlencode({'next': target})}"


def make_templates(templates: dict[str, str], **globals_: Any) -> jinja2.Environment:
    """A Jinja2 environment over in-module template strings, autoescaping everything."""
    env = jinja2.Environment(
        loader=jinja2.DictLoader(templates),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["money"] = money
    env.filters["long_date"] = long_date
    env.filters["date_time"] = date_time
    env.globals.update(globals_)
    return env


class Context:
    """One request: its database connection, parsed form, flash message and cookies to send back."""

    flash_cookie = "flash"

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


async def parse_form(request: Request) -> dict[str, str]:
    """An urlencoded POST body as {name: first value} (no multipart: no form here uploads files)."""
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise HttpError(413, "Request too large", "The form you sent is too large.")
    parsed = parse_qs(body.decode("utf-8", errors="replace"), keep_blank_values=True)
    return {name: values[0] for name, values in parsed.items()}


Handler = Callable[[Any], Response]


def start_session(ctx: Any, site: str, user_id: int, cookie: str) -> None:
    """Sign ``user_id`` in: a login token in the session's database, set as ``cookie``."""
    token = secrets.token_urlsafe(24)
    ctx.db.execute("INSERT INTO sessions (token, site, user_id) VALUES (?, ?, ?)", (token, site, user_id))
    ctx.set_cookie(cookie, token)


def endpoint(
    dbs: Databases,
    make_context: Callable[[Request, sqlite3.Connection, dict[str, str]], Context],
    handler: Handler,
    render_error: Callable[[Context | None, HttpError], Response],
) -> Callable[[Request], Any]:
    """Wrap a sync handler of a Context into a Starlette endpoint: pick the database, parse the form,
    commit on success (roll back on error), turn Redirect/HttpError into responses, send cookies."""

    async def run(request: Request) -> Response:
        token = request.headers.get(SESSION_HEADER) or Databases.DEFAULT
        try:
            db = dbs.connect(token, create=token == Databases.DEFAULT)
        except KeyError:
            return render_error(None, HttpError(404, "Unknown session", f"Unknown session {token!r}."))
        ctx: Context | None = None
        try:
            form = await parse_form(request) if request.method == "POST" else {}
            ctx = make_context(request, db, form)
            try:
                response = handler(ctx)
                db.commit()
            except Redirect as redirect:
                db.commit()
                response = RedirectResponse(redirect.url, status_code=303)
            except HttpError as error:
                db.rollback()
                response = render_error(ctx, error)
        except HttpError as error:
            response = render_error(ctx, error)
        finally:
            db.close()
        if ctx is not None:
            ctx.apply_cookies(response)
        return response

    return run


def html(body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(body, status_code=status)
