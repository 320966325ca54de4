"""The forum's request context (``ForumContext``: the signed-in user, the page layout), and the
post and forum lookups, listings and timestamps its handlers share.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta
from typing import Any

from ..auth import AccountContext, Accounts
from ..data.clock import SITE_NOW
from ..data.forum import FORUM_NAME
from ..errors import HttpError
from ..rendering import make_templates

ACCOUNTS = Accounts(site="forum", table="forum_users", login_field="username", cookie="forum_session")
SORTS = [("hot", "Hot"), ("new", "New"), ("top", "Top")]

# Posts with what a listing shows; callers append WHERE and ORDER BY.
POST_SELECT = """
SELECT p.*, f.name AS forum_name, u.username,
       (SELECT COUNT(*) FROM forum_comments c WHERE c.post_id = p.id) AS comment_count
FROM forum_posts p JOIN forum_forums f ON f.id = p.forum_id JOIN forum_users u ON u.id = p.user_id
"""


class ForumContext(AccountContext):
    """A forum request: the signed-in user and the forum's page layout."""

    flash_cookie = "forum_flash"
    accounts = ACCOUNTS
    templates = make_templates("forum", site_name=FORUM_NAME, sorts=SORTS)
    blank_chrome = {"user": None}

    def chrome(self) -> dict[str, Any]:
        return {"user": self.user}


def next_time(db: sqlite3.Connection) -> str:
    """Timestamp for new content: a minute after the newest post or comment, and after SITE_NOW."""
    newest = db.execute(
        "SELECT MAX(created) FROM (SELECT created FROM forum_posts UNION ALL SELECT created FROM forum_comments)"
    ).fetchone()[0]
    moment = max(SITE_NOW, datetime.fromisoformat(newest)) if newest else SITE_NOW
    return (moment + timedelta(minutes=1)).isoformat(" ")


def _hot_key(row: sqlite3.Row) -> float:
    hours = max((SITE_NOW - datetime.fromisoformat(row["created"])).total_seconds() / 3600, 0.0)
    return row["score"] / (hours + 2) ** 1.5


def sorted_posts(
    ctx: ForumContext, where: str = "", params: tuple[Any, ...] = (), limit: int = 50
) -> tuple[str, list]:
    sort = ctx.query("sort", "hot")
    sort = sort if sort in dict(SORTS) else "hot"
    rows = ctx.db.execute(POST_SELECT + where + " ORDER BY p.created DESC, p.id DESC", params).fetchall()
    if sort == "hot":
        rows.sort(key=_hot_key, reverse=True)
    elif sort == "top":
        rows.sort(key=lambda row: row["score"], reverse=True)  # stable: ties stay newest first
    return sort, rows[:limit]


def find_forum(ctx: ForumContext) -> sqlite3.Row:
    row = ctx.db.execute(
        "SELECT * FROM forum_forums WHERE name = ?", (ctx.request.path_params["forum"],)
    ).fetchone()
    if row is None:
        raise HttpError(404, "Forum not found", "There is no forum with this name.")
    return row


def find_post(ctx: ForumContext) -> sqlite3.Row:
    forum = find_forum(ctx)
    row = ctx.db.execute(
        POST_SELECT + " WHERE p.id = ? AND p.forum_id = ?", (ctx.request.path_params["post_id"], forum["id"])
    ).fetchone()
    if row is None:
        raise HttpError(404, "Post not found", "This post does not exist or was deleted.")
    return row


def post_url(post: sqlite3.Row) -> str:
    return f"/f/{post['forum_name']}/{post['id']}"
