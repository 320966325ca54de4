"""The forum's pages for writing: subscribing, commenting, submitting, editing and deleting posts,
and creating forums.
"""

from __future__ import annotations

import re

from starlette.responses import Response

from ..errors import HttpError
from .context import ForumContext, find_forum, find_post, next_time, post_url

_NAME_RE = re.compile(r"^[A-Za-z0-9_]{3,25}$")


def subscribe(ctx: ForumContext) -> Response:
    f = find_forum(ctx)
    user = ctx.require_user(f"/f/{f['name']}")
    key = (user["id"], f["id"])
    if ctx.db.execute("SELECT 1 FROM forum_subscriptions WHERE user_id = ? AND forum_id = ?", key).fetchone():
        ctx.db.execute("DELETE FROM forum_subscriptions WHERE user_id = ? AND forum_id = ?", key)
        return ctx.redirect(f"/f/{f['name']}", f"You unsubscribed from /f/{f['name']}.")
    ctx.db.execute("INSERT INTO forum_subscriptions (user_id, forum_id) VALUES (?, ?)", key)
    return ctx.redirect(f"/f/{f['name']}", f"You subscribed to /f/{f['name']}.")


def add_comment(ctx: ForumContext) -> Response:
    p = find_post(ctx)
    user = ctx.require_user(post_url(p))
    body = ctx.field("body")
    parent_id: int | None = None
    if ctx.field("parent_id"):
        parent = ctx.db.execute(
            "SELECT id FROM forum_comments WHERE id = ? AND post_id = ?", (ctx.field("parent_id"), p["id"])
        ).fetchone()
        if parent is None:
            raise HttpError(404, "Comment not found", "The comment you replied to does not exist.")
        parent_id = parent["id"]
    if not body:
        return ctx.redirect(post_url(p), "Your comment was empty, so nothing was posted.")
    cursor = ctx.db.execute(
        "INSERT INTO forum_comments (post_id, parent_id, user_id, body, created, score) VALUES (?, ?, ?, ?, ?, 1)",
        (p["id"], parent_id, user["id"], body[:10000], next_time(ctx.db)),
    )
    # Like a post, a new comment starts with its author's upvote.
    ctx.db.execute(
        "INSERT INTO forum_comment_votes (user_id, comment_id, value) VALUES (?, ?, 1)",
        (user["id"], cursor.lastrowid),
    )
    return ctx.redirect(f"{post_url(p)}#comment-{cursor.lastrowid}", "Your comment was posted.")


def submit(ctx: ForumContext) -> Response:
    user = ctx.require_user("/submit")
    all_forums = ctx.db.execute("SELECT * FROM forum_forums ORDER BY name").fetchall()
    page = {
        "page_title": "Create submission",
        "heading": "Create submission",
        "action": "/submit",
        "forums": all_forums,
        "button": "Create post",
    }
    if ctx.request.method == "GET":
        return ctx.render(
            "post_form.html", values={"forum": ctx.query("forum"), "title": "", "body": ""}, **page
        )
    values = {"forum": ctx.field("forum"), "title": ctx.field("title"), "body": ctx.field("body")}
    target = next((f for f in all_forums if f["name"].lower() == values["forum"].lower()), None)
    error = None
    if target is None:
        error = "Please choose a forum."
    elif not values["title"]:
        error = "Please enter a title."
    elif len(values["title"]) > 300:
        error = "The title must be at most 300 characters long."
    if error:
        return ctx.render("post_form.html", 400, values=values, error=error, **page)
    assert target is not None
    cursor = ctx.db.execute(
        "INSERT INTO forum_posts (forum_id, user_id, title, body, created, score) VALUES (?, ?, ?, ?, ?, 1)",
        (target["id"], user["id"], values["title"], values["body"][:40000], next_time(ctx.db)),
    )
    # Postmill counts the author's own upvote on a new submission.
    ctx.db.execute(
        "INSERT INTO forum_post_votes (user_id, post_id, value) VALUES (?, ?, 1)",
        (user["id"], cursor.lastrowid),
    )
    return ctx.redirect(f"/f/{target['name']}/{cursor.lastrowid}", "Your post was created.")


def edit_post(ctx: ForumContext) -> Response:
    p = find_post(ctx)
    user = ctx.require_user(f"{post_url(p)}/edit")
    if user["id"] != p["user_id"]:
        raise HttpError(403, "Not allowed", "You can only edit your own posts.")
    page = {"page_title": "Edit post", "heading": "Edit post", "action": f"{post_url(p)}/edit", "forums": []}
    if ctx.request.method == "GET":
        return ctx.render("post_form.html", values=dict(p), button="Save changes", **page)
    values = {"title": ctx.field("title"), "body": ctx.field("body")}
    if not values["title"] or len(values["title"]) > 300:
        return ctx.render(
            "post_form.html", 400, values=values, button="Save changes", error="Please enter a title.", **page
        )
    ctx.db.execute(
        "UPDATE forum_posts SET title = ?, body = ?, edited = ? WHERE id = ?",
        (values["title"], values["body"][:40000], next_time(ctx.db), p["id"]),
    )
    return ctx.redirect(post_url(p), "Your post was updated.")


def delete_post(ctx: ForumContext) -> Response:
    p = find_post(ctx)
    user = ctx.require_user(post_url(p))
    if user["id"] != p["user_id"]:
        raise HttpError(403, "Not allowed", "You can only delete your own posts.")
    ctx.db.execute("DELETE FROM forum_posts WHERE id = ?", (p["id"],))
    return ctx.redirect(f"/f/{p['forum_name']}", "Your post was deleted.")


def create_forum(ctx: ForumContext) -> Response:
    user = ctx.require_user("/create_forum")
    if ctx.request.method == "GET":
        return ctx.render(
            "create_forum.html",
            page_title="Create forum",
            values={"name": "", "title": "", "description": ""},
        )
    values = {"name": ctx.field("name"), "title": ctx.field("title"), "description": ctx.field("description")}
    error = None
    if not _NAME_RE.match(values["name"]):
        error = "The name must be 3 to 25 letters, digits or underscores."
    elif not values["title"]:
        error = "Please enter a title."
    elif ctx.db.execute("SELECT 1 FROM forum_forums WHERE name = ?", (values["name"],)).fetchone():
        error = "A forum with this name already exists."
    if error:
        return ctx.render("create_forum.html", 400, page_title="Create forum", values=values, error=error)
    cursor = ctx.db.execute(
        "INSERT INTO forum_forums (name, title, description, created) VALUES (?, ?, ?, ?)",
        (values["name"], values["title"][:100], values["description"][:1000], next_time(ctx.db)),
    )
    ctx.db.execute(
        "INSERT INTO forum_subscriptions (user_id, forum_id) VALUES (?, ?)", (user["id"], cursor.lastrowid)
    )
    return ctx.redirect(f"/f/{values['name']}", f"The forum /f/{values['name']} was created.")
