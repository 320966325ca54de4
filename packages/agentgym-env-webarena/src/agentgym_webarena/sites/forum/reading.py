"""The forum's pages for reading: the front page, forums, a post with its comment tree, the reply
form, search and user pages.
"""

from __future__ import annotations

import re
import sqlite3

from starlette.responses import Response

from ..errors import HttpError
from ..urls import here
from .context import POST_SELECT, ForumContext, find_forum, find_post, post_url, sorted_posts


def front(ctx: ForumContext) -> Response:
    sort, posts = sorted_posts(ctx, limit=25)
    forums = ctx.db.execute("SELECT * FROM forum_forums ORDER BY name").fetchall()
    return ctx.render("front.html", heading="Front page", posts=posts, sort=sort, forums=forums)


def forums(ctx: ForumContext) -> Response:
    rows = ctx.db.execute(
        "SELECT f.*, (SELECT COUNT(*) FROM forum_posts p WHERE p.forum_id = f.id) AS post_count, "
        "(SELECT COUNT(*) FROM forum_subscriptions s WHERE s.forum_id = f.id) AS subscriber_count "
        "FROM forum_forums f ORDER BY f.name"
    ).fetchall()
    return ctx.render("forums.html", page_title="List of forums", forums=rows)


def forum(ctx: ForumContext) -> Response:
    f = find_forum(ctx)
    sort, posts = sorted_posts(ctx, " WHERE p.forum_id = ?", (f["id"],))
    subscribers = ctx.db.execute(
        "SELECT COUNT(*) FROM forum_subscriptions WHERE forum_id = ?", (f["id"],)
    ).fetchone()[0]
    subscribed = ctx.user is not None and bool(
        ctx.db.execute(
            "SELECT 1 FROM forum_subscriptions WHERE forum_id = ? AND user_id = ?", (f["id"], ctx.user["id"])
        ).fetchone()
    )
    return ctx.render(
        "forum.html",
        page_title=f"/f/{f['name']}",
        forum=f,
        posts=posts,
        sort=sort,
        subscriber_count=subscribers,
        subscribed=subscribed,
    )


def post(ctx: ForumContext) -> Response:
    p = find_post(ctx)
    comments = ctx.db.execute(
        "SELECT c.*, u.username FROM forum_comments c JOIN forum_users u ON u.id = c.user_id "
        "WHERE c.post_id = ? ORDER BY c.created, c.id",
        (p["id"],),
    ).fetchall()
    children: dict[int | None, list[sqlite3.Row]] = {}
    for comment in comments:
        children.setdefault(comment["parent_id"], []).append(comment)
    my_vote, my_comment_votes = 0, {}
    if ctx.user is not None:
        row = ctx.db.execute(
            "SELECT value FROM forum_post_votes WHERE user_id = ? AND post_id = ?", (ctx.user["id"], p["id"])
        ).fetchone()
        my_vote = row["value"] if row else 0
        my_comment_votes = {
            row["comment_id"]: row["value"]
            for row in ctx.db.execute(
                "SELECT v.comment_id, v.value FROM forum_comment_votes v JOIN forum_comments c ON c.id = v.comment_id "
                "WHERE v.user_id = ? AND c.post_id = ?",
                (ctx.user["id"], p["id"]),
            )
        }
    return ctx.render(
        "post.html",
        page_title=p["title"],
        post=p,
        paragraphs=[part.strip() for part in re.split(r"\n\s*\n", p["body"]) if part.strip()],
        comment_count=len(comments),
        children=children,
        my_vote=my_vote,
        my_comment_votes=my_comment_votes,
        login_link=ctx.login_link(post_url(p)),
    )


def reply_form(ctx: ForumContext) -> Response:
    p = find_post(ctx)
    comment = ctx.db.execute(
        "SELECT c.*, u.username FROM forum_comments c JOIN forum_users u ON u.id = c.user_id "
        "WHERE c.id = ? AND c.post_id = ?",
        (ctx.request.path_params["comment_id"], p["id"]),
    ).fetchone()
    if comment is None:
        raise HttpError(404, "Comment not found", "This comment does not exist.")
    return ctx.render(
        "reply.html",
        page_title=f"Reply to {comment['username']}",
        post=p,
        comment=comment,
        login_link=ctx.login_link(here(ctx.request)),
    )


def user_page(ctx: ForumContext) -> Response:
    profile = ctx.db.execute(
        "SELECT * FROM forum_users WHERE username = ?", (ctx.request.path_params["username"],)
    ).fetchone()
    if profile is None:
        raise HttpError(404, "User not found", "There is no user with this name.")
    posts = ctx.db.execute(
        POST_SELECT + " WHERE p.user_id = ? ORDER BY p.created DESC, p.id DESC", (profile["id"],)
    ).fetchall()
    comments = ctx.db.execute(
        "SELECT c.*, p.title AS post_title, f.name AS forum_name FROM forum_comments c "
        "JOIN forum_posts p ON p.id = c.post_id JOIN forum_forums f ON f.id = p.forum_id "
        "WHERE c.user_id = ? ORDER BY c.created DESC, c.id DESC",
        (profile["id"],),
    ).fetchall()
    karma = sum(p["score"] for p in posts) + sum(c["score"] for c in comments)
    return ctx.render(
        "user.html",
        page_title=profile["username"],
        profile=profile,
        posts=posts,
        comments=comments,
        karma=karma,
    )


def search(ctx: ForumContext) -> Response:
    query = ctx.query("q").strip()
    words = query.lower().split()
    posts: list[sqlite3.Row] = []
    if words:
        clauses = " AND ".join("(instr(lower(p.title), ?) > 0 OR instr(lower(p.body), ?) > 0)" for _ in words)
        params = [value for word in words for value in (word, word)]
        posts = ctx.db.execute(
            POST_SELECT + f" WHERE {clauses} ORDER BY p.created DESC, p.id DESC LIMIT 50", params
        ).fetchall()
    return ctx.render("search.html", page_title=f'Search results for "{query}"', query=query, posts=posts)
