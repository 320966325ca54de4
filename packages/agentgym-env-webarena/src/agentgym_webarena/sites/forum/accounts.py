"""The forum's account pages: login, logout, registration and editing one's biography."""

from __future__ import annotations

import re

from starlette.responses import Response

from ..auth import hash_password, login_handler, logout_handler
from ..data.clock import SITE_NOW
from ..data.forum import FORUM_NAME
from ..errors import HttpError
from ..urls import here
from .context import ForumContext

_USERNAME_RE = re.compile(r"^[A-Za-z0-9_-]{3,25}$")


def edit_biography(ctx: ForumContext) -> Response:
    user = ctx.require_user(here(ctx.request))
    if user["username"].lower() != ctx.request.path_params["username"].lower():
        raise HttpError(403, "Not allowed", "You can only edit your own biography.")
    if ctx.request.method == "GET":
        return ctx.render("edit_bio.html", page_title="Edit biography", bio=user["bio"])
    ctx.db.execute("UPDATE forum_users SET bio = ? WHERE id = ?", (ctx.field("bio")[:1000], user["id"]))
    return ctx.redirect(f"/user/{user['username']}", "Your biography was saved.")


login = login_handler(title="Log in", default_next="/", refused="Invalid username or password.")
logout = logout_handler("You are logged out.")


def registration(ctx: ForumContext) -> Response:
    if ctx.request.method == "GET":
        return ctx.render("registration.html", page_title="Sign up", username="")
    username, password = ctx.field("username"), ctx.form.get("password", "")
    error = None
    if not _USERNAME_RE.match(username):
        error = "The username must be 3 to 25 letters, digits, hyphens or underscores."
    elif len(password) < 6:
        error = "The password must have at least 6 characters."
    elif ctx.db.execute("SELECT 1 FROM forum_users WHERE username = ?", (username,)).fetchone():
        error = "This username is already taken."
    if error:
        return ctx.render("registration.html", 400, page_title="Sign up", username=username, error=error)
    cursor = ctx.db.execute(
        "INSERT INTO forum_users (username, password_hash, bio, created) VALUES (?, ?, '', ?)",
        (username, hash_password(password), SITE_NOW.isoformat(" ")),
    )
    ctx.sign_in(int(cursor.lastrowid or 0))
    return ctx.redirect("/", f"Welcome to {FORUM_NAME}, {username}!")
