"""Accounts, login sessions and the cross-site request check of both sites, and their login pages.

A signed-in visitor holds a random token in the site's session cookie; the token is a row of the
session database's ``sessions`` table (``site`` tells the shop's from the forum's), so resetting a
session's database signs everyone out of it. Passwords are checked against the salted hashes of the
``passwords`` module (``hash_password``/``check_password``, re-exported here).

Cross-site request forgery is refused by origin rather than by a token in every form: a browser
sends ``Origin`` with every POST, so a form posted from another site's page (the other bundled site
included, which is another port) names a host that is not this one. Requests without ``Origin``
(scripts and tests over plain HTTP) are not a browser acting for a signed-in user on another site's
behalf, and pass; checking a header also leaves every page's markup as it was.
"""

from __future__ import annotations

import secrets
import sqlite3
from dataclasses import dataclass
from typing import ClassVar
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response

from .common import Context, Handler
from .errors import HttpError, Redirect
from .passwords import check_password, hash_password
from .urls import here, login_url, referer_path, safe_next

__all__ = [
    "AccountContext",
    "Accounts",
    "check_origin",
    "check_password",
    "hash_password",
    "login_handler",
    "logout_handler",
]


@dataclass(frozen=True)
class Accounts:
    """Where one site keeps its accounts: its name in ``sessions``, its user table, the login column
    (also the login form's field), its session cookie and its login page."""

    site: str
    table: str
    login_field: str
    cookie: str
    login_path: str = "/login"

    def user_for(self, db: sqlite3.Connection, token: str | None) -> sqlite3.Row | None:
        """The user a session token belongs to, if the token is one of this site's sessions."""
        if not token:
            return None
        return db.execute(
            f"SELECT u.* FROM sessions s JOIN {self.table} u ON u.id = s.user_id "
            "WHERE s.token = ? AND s.site = ?",
            (token, self.site),
        ).fetchone()

    def authenticate(self, db: sqlite3.Connection, login: str, password: str) -> sqlite3.Row | None:
        """The user whose login and password these are, or None."""
        row = db.execute(f"SELECT * FROM {self.table} WHERE {self.login_field} = ?", (login,)).fetchone()
        if row is None or not check_password(password, row["password_hash"]):
            return None
        return row

    def open_session(self, db: sqlite3.Connection, user_id: int) -> str:
        """A new login session for ``user_id``; returns its token (the session cookie's value)."""
        token = secrets.token_urlsafe(24)
        db.execute(
            "INSERT INTO sessions (token, site, user_id) VALUES (?, ?, ?)", (token, self.site, user_id)
        )
        return token

    def close_session(self, db: sqlite3.Connection, token: str | None) -> None:
        if token:
            db.execute("DELETE FROM sessions WHERE token = ? AND site = ?", (token, self.site))

    def set_password(self, db: sqlite3.Connection, user_id: int, password: str) -> None:
        db.execute(
            f"UPDATE {self.table} SET password_hash = ? WHERE id = ?", (hash_password(password), user_id)
        )


def check_origin(request: Request) -> None:
    """Refuse a POST that a browser sent from another site's page (see the module docstring)."""
    origin = request.headers.get("origin")
    if request.method != "POST" or origin is None:
        return
    if urlsplit(origin).netloc != request.headers.get("host"):
        raise HttpError(403, "Request refused", "This form was sent from another site and was not accepted.")


class AccountContext(Context):
    """A Context that knows who is signed in (``user``) through the site's session cookie."""

    accounts: ClassVar[Accounts]

    def __init__(self, request: Request, db: sqlite3.Connection, form: dict[str, str]) -> None:
        super().__init__(request, db, form)
        self.user = self.accounts.user_for(db, request.cookies.get(self.accounts.cookie))

    def login_link(self, target: str) -> str:
        """The login page, coming back to ``target`` after signing in."""
        return login_url(self.accounts.login_path, target)

    def require_user(self, back: str | None = None) -> sqlite3.Row:
        """The signed-in user; else a redirect to the login page that comes back to ``back``."""
        if self.user is None:
            target = back or here(self.request)
            if not back and self.request.method == "POST":
                # After signing in, go back to the page the form was on rather than to a POST-only URL.
                target = safe_next(self.form.get("back"), referer_path(self.request, "/"))
            raise Redirect(self.login_link(target))
        return self.user

    def sign_in(self, user_id: int) -> None:
        self.set_cookie(self.accounts.cookie, self.accounts.open_session(self.db, user_id))

    def sign_out(self) -> None:
        self.accounts.close_session(self.db, self.request.cookies.get(self.accounts.cookie))
        self.delete_cookie(self.accounts.cookie)


def login_handler(*, title: str, default_next: str, refused: str) -> Handler:
    """A site's login page: GET shows the form (or goes on to ``next`` if already signed in), POST
    signs in and goes on to ``next``, or shows the form again with ``refused`` as its alert."""

    def login(ctx: AccountContext) -> Response:
        next_url = safe_next(ctx.form.get("next") or ctx.query("next"), default_next)
        if ctx.request.method == "GET":
            if ctx.user is not None:
                return ctx.redirect(next_url)
            return ctx.render("login.html", page_title=title, next=next_url, login_name="")
        login_name = ctx.field(ctx.accounts.login_field)
        user = ctx.accounts.authenticate(ctx.db, login_name, ctx.form.get("password", ""))
        if user is None:
            return ctx.render(
                "login.html", 401, page_title=title, next=next_url, login_name=login_name, error=refused
            )
        ctx.sign_in(user["id"])
        return ctx.redirect(next_url)

    return login


def logout_handler(signed_out: str) -> Handler:
    """A site's logout (GET or POST): ends the session and goes home with ``signed_out`` as the flash."""

    def logout(ctx: AccountContext) -> Response:
        ctx.sign_out()
        return ctx.redirect("/", signed_out)

    return logout
