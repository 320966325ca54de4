"""Local URLs: where a ``next`` parameter or a Referer may send the visitor, and the login link."""

from __future__ import annotations

from urllib.parse import urlencode, urlsplit

from starlette.requests import Request


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
