"""The forum's votes: up or down on a post or a comment, the same vote again taking it back, and the
score kept in step.
"""

from __future__ import annotations

import sqlite3

from starlette.responses import Response

from ..errors import HttpError
from .context import ForumContext, find_post, post_url


def _apply_vote(db: sqlite3.Connection, kind: str, target_id: int, user_id: int, value: int) -> int:
    """Record ``user_id``'s vote (+1/-1) on a post or comment; the same vote twice takes it back.
    Returns the user's vote afterwards (0 when taken back)."""
    votes, column, table = {
        "post": ("forum_post_votes", "post_id", "forum_posts"),
        "comment": ("forum_comment_votes", "comment_id", "forum_comments"),
    }[kind]
    row = db.execute(
        f"SELECT value FROM {votes} WHERE user_id = ? AND {column} = ?", (user_id, target_id)
    ).fetchone()
    old = row["value"] if row else 0
    new = 0 if old == value else value
    if new == 0:
        db.execute(f"DELETE FROM {votes} WHERE user_id = ? AND {column} = ?", (user_id, target_id))
    else:
        db.execute(
            f"INSERT INTO {votes} (user_id, {column}, value) VALUES (?, ?, ?) "
            f"ON CONFLICT (user_id, {column}) DO UPDATE SET value = excluded.value",
            (user_id, target_id, new),
        )
    db.execute(f"UPDATE {table} SET score = score + ? WHERE id = ?", (new - old, target_id))
    return new


def _vote_message(new: int, what: str) -> str:
    return {1: f"You upvoted this {what}.", -1: f"You downvoted this {what}.", 0: "You took back your vote."}[
        new
    ]


def _direction(ctx: ForumContext) -> int:
    direction = ctx.field("direction")
    if direction not in ("up", "down"):
        raise HttpError(400, "Bad request", "A vote must be up or down.")
    return 1 if direction == "up" else -1


def vote_post(ctx: ForumContext) -> Response:
    p = find_post(ctx)
    user = ctx.require_user(post_url(p))
    new = _apply_vote(ctx.db, "post", p["id"], user["id"], _direction(ctx))
    return ctx.redirect(post_url(p), _vote_message(new, "post"))


def vote_comment(ctx: ForumContext) -> Response:
    row = ctx.db.execute(
        "SELECT c.id, c.post_id, f.name AS forum_name FROM forum_comments c JOIN forum_posts p ON p.id = c.post_id "
        "JOIN forum_forums f ON f.id = p.forum_id WHERE c.id = ?",
        (ctx.request.path_params["comment_id"],),
    ).fetchone()
    if row is None:
        raise HttpError(404, "Comment not found", "This comment does not exist.")
    back = f"/f/{row['forum_name']}/{row['post_id']}"
    user = ctx.require_user(back)
    new = _apply_vote(ctx.db, "comment", row["id"], user["id"], _direction(ctx))
    return ctx.redirect(f"{back}#comment-{row['id']}", _vote_message(new, "comment"))
