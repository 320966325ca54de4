"""A site's handlers as a Starlette app: per-request database selection, form parsing, the origin
check, commit or rollback, and redirects and errors turned into responses.

Each request picks its database by the ``X-AgentGym-Session`` header (Playwright sets it per browser
context as an extra HTTP header). Without the header the request uses the ``default`` copy, opened on
first use, for a person browsing. A header naming a token that ``Databases`` has not opened gets a 404
"Unknown session" page: a typo or a dropped session must not silently land on a fresh database.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from .auth import check_origin
from .common import Context, Handler
from .db import Databases
from .errors import HttpError, Redirect

SESSION_HEADER = "x-agentgym-session"
MAX_FORM_BYTES = 256 * 1024
GET, POST = ["GET"], ["POST"]
GET_POST = ["GET", "POST"]


async def parse_form(request: Request) -> dict[str, str]:
    """An urlencoded POST body as {name: first value} (no multipart: no form here uploads files)."""
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise HttpError(413, "Request too large", "The form you sent is too large.")
    parsed = parse_qs(body.decode("utf-8", errors="replace"), keep_blank_values=True)
    return {name: values[0] for name, values in parsed.items()}


def _answer(ctx: Context, handler: Handler) -> Response:
    """The handler's response; its database work is committed unless it answered with an error."""
    try:
        check_origin(ctx.request)
        response = handler(ctx)
        ctx.db.commit()
    except Redirect as redirect:
        ctx.db.commit()
        response = RedirectResponse(redirect.url, status_code=303)
    except HttpError as error:
        ctx.db.rollback()
        response = ctx.error_page(ctx, error)
    return response


def endpoint(dbs: Databases, site: type[Context], handler: Handler) -> Callable[[Request], Any]:
    """Wrap a sync handler of a ``site`` Context into a Starlette endpoint: pick the database, parse
    the form, run the handler (``_answer``), send the Context's cookies."""

    async def run(request: Request) -> Response:
        token = request.headers.get(SESSION_HEADER) or Databases.DEFAULT
        try:
            db = dbs.connect(token, create=token == Databases.DEFAULT)
        except KeyError:
            return site.error_page(None, HttpError(404, "Unknown session", f"Unknown session {token!r}."))
        ctx: Context | None = None
        try:
            form = await parse_form(request) if request.method == "POST" else {}
            ctx = site(request, db, form)
            response = _answer(ctx, handler)
        except HttpError as error:
            response = site.error_page(ctx, error)
        finally:
            db.close()
        if ctx is not None:
            ctx.apply_cookies(response)
        return response

    return run


def not_found(ctx: Context) -> Response:
    raise HttpError(404, "Page not found", "The page you requested was not found.")


def site_app(
    dbs: Databases, site: type[Context], routes: Iterable[tuple[str, Handler, list[str]]]
) -> Starlette:
    """A Starlette app serving ``routes`` (path, handler, methods) over ``dbs``, and a 404 page with the
    full layout at every other URL, so the visitor can navigate on."""
    return Starlette(
        routes=[
            *(
                Route(path, endpoint(dbs, site, handler), methods=methods)
                for path, handler, methods in routes
            ),
            Route("/{path:path}", endpoint(dbs, site, not_found)),
        ]
    )
