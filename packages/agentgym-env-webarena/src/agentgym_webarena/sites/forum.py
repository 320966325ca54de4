"""Postmill: the embedded stand-in for WebArena's Reddit-like forum (``create_forum_app``).

Server-rendered HTML, every function reachable without JavaScript. Routes:

    GET  /                              front page: posts of all forums (?sort=hot|new|top) and the forum list
    GET  /forums                        list of forums with descriptions and post counts
    GET  /f/<forum>                     a forum's posts (?sort=hot|new|top), Subscribe button
    POST /f/<forum>/subscribe           toggle the signed-in user's subscription
    GET  /f/<forum>/<post id>           a post: body, score, Upvote/Downvote, comments, comment form
    POST /f/<forum>/<post id>/vote      direction=up|down; the same direction again takes the vote back
    POST /f/<forum>/<post id>/comment   body, parent_id (optional: the comment answered)
    GET  /f/<forum>/<post id>/comment/<comment id>/reply   a reply form under one comment
    POST /comment/<comment id>/vote     direction=up|down, toggles like a post vote
    GET  /f/<forum>/<post id>/edit, POST    title, body (the author only)
    POST /f/<forum>/<post id>/delete    the author only
    GET  /submit, POST /submit          forum (a forum name), title, body; ?forum= preselects
    GET  /create_forum, POST            name, title, description
    GET  /user/<username>               bio, karma, the user's posts and comments
    GET  /user/<username>/edit_biography, POST   bio (the user only)
    GET  /search?q=                     posts with every word of q in the title or the body
    GET  /login, POST /login            username, password, next
    GET  /registration, POST            username, password
    GET  /logout (or POST)

Scores are the sum of the +1/-1 votes (``forum_post_votes``, ``forum_comment_votes``), kept in the
``score`` columns. Hot ranks by score against age, measured from the sites' frozen clock ``SITE_NOW``;
posts and comments written here are stamped one minute after the newest content (never the wall clock),
so the same actions always produce the same pages.
"""

from __future__ import annotations

import re
import sqlite3
from datetime import datetime, timedelta
from typing import Any

from starlette.applications import Starlette
from starlette.responses import Response

from .app import GET, GET_POST, POST, site_app
from .auth import AccountContext, Accounts, hash_password, login_handler, logout_handler
from .data.clock import SITE_NOW
from .data.forum import FORUM_NAME
from .db import Databases
from .errors import HttpError
from .rendering import make_templates
from .urls import here

ACCOUNTS = Accounts(site="forum", table="forum_users", login_field="username", cookie="forum_session")
SORTS = [("hot", "Hot"), ("new", "New"), ("top", "Top")]
_NAME_RE = re.compile(r"^[A-Za-z0-9_]{3,25}$")
_USERNAME_RE = re.compile(r"^[A-Za-z0-9_-]{3,25}$")

# Posts with what a listing shows; callers append WHERE and ORDER BY.
_POST_SELECT = """
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


def _next_time(db: sqlite3.Connection) -> str:
    """Timestamp for new content: a minute after the newest post or comment, and after SITE_NOW."""
    newest = db.execute(
        "SELECT MAX(created) FROM (SELECT created FROM forum_posts UNION ALL SELECT created FROM forum_comments)"
    ).fetchone()[0]
    moment = max(SITE_NOW, datetime.fromisoformat(newest)) if newest else SITE_NOW
    return (moment + timedelta(minutes=1)).isoformat(" ")


def _hot_key(row: sqlite3.Row) -> float:
    hours = max((SITE_NOW - datetime.fromisoformat(row["created"])).total_seconds() / 3600, 0.0)
    return row["score"] / (hours + 2) ** 1.5


def _sorted_posts(
    ctx: ForumContext, where: str = "", params: tuple[Any, ...] = (), limit: int = 50
) -> tuple[str, list]:
    sort = ctx.query("sort", "hot")
    sort = sort if sort in dict(SORTS) else "hot"
    rows = ctx.db.execute(_POST_SELECT + where + " ORDER BY p.created DESC, p.id DESC", params).fetchall()
    if sort == "hot":
        rows.sort(key=_hot_key, reverse=True)
    elif sort == "top":
        rows.sort(key=lambda row: row["score"], reverse=True)  # stable: ties stay newest first
    return sort, rows[:limit]


def _forum(ctx: ForumContext) -> sqlite3.Row:
    row = ctx.db.execute(
        "SELECT * FROM forum_forums WHERE name = ?", (ctx.request.path_params["forum"],)
    ).fetchone()
    if row is None:
        raise HttpError(404, "Forum not found", "There is no forum with this name.")
    return row


def _post(ctx: ForumContext) -> sqlite3.Row:
    forum = _forum(ctx)
    row = ctx.db.execute(
        _POST_SELECT + " WHERE p.id = ? AND p.forum_id = ?", (ctx.request.path_params["post_id"], forum["id"])
    ).fetchone()
    if row is None:
        raise HttpError(404, "Post not found", "This post does not exist or was deleted.")
    return row


def _post_url(post: sqlite3.Row) -> str:
    return f"/f/{post['forum_name']}/{post['id']}"


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


# -------------------------------------------------------------------------------------------- reading


def front(ctx: ForumContext) -> Response:
    sort, posts = _sorted_posts(ctx, limit=25)
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
    f = _forum(ctx)
    sort, posts = _sorted_posts(ctx, " WHERE p.forum_id = ?", (f["id"],))
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


def subscribe(ctx: ForumContext) -> Response:
    f = _forum(ctx)
    user = ctx.require_user(f"/f/{f['name']}")
    key = (user["id"], f["id"])
    if ctx.db.execute("SELECT 1 FROM forum_subscriptions WHERE user_id = ? AND forum_id = ?", key).fetchone():
        ctx.db.execute("DELETE FROM forum_subscriptions WHERE user_id = ? AND forum_id = ?", key)
        return ctx.redirect(f"/f/{f['name']}", f"You unsubscribed from /f/{f['name']}.")
    ctx.db.execute("INSERT INTO forum_subscriptions (user_id, forum_id) VALUES (?, ?)", key)
    return ctx.redirect(f"/f/{f['name']}", f"You subscribed to /f/{f['name']}.")


def post(ctx: ForumContext) -> Response:
    p = _post(ctx)
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
        login_link=ctx.login_link(_post_url(p)),
    )


def vote_post(ctx: ForumContext) -> Response:
    p = _post(ctx)
    user = ctx.require_user(_post_url(p))
    new = _apply_vote(ctx.db, "post", p["id"], user["id"], _direction(ctx))
    return ctx.redirect(_post_url(p), _vote_message(new, "post"))


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


def add_comment(ctx: ForumContext) -> Response:
    p = _post(ctx)
    user = ctx.require_user(_post_url(p))
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
        return ctx.redirect(_post_url(p), "Your comment was empty, so nothing was posted.")
    cursor = ctx.db.execute(
        "INSERT INTO forum_comments (post_id, parent_id, user_id, body, created, score) VALUES (?, ?, ?, ?, ?, 1)",
        (p["id"], parent_id, user["id"], body[:10000], _next_time(ctx.db)),
    )
    # Like a post, a new comment starts with its author's upvote.
    ctx.db.execute(
        "INSERT INTO forum_comment_votes (user_id, comment_id, value) VALUES (?, ?, 1)",
        (user["id"], cursor.lastrowid),
    )
    return ctx.redirect(f"{_post_url(p)}#comment-{cursor.lastrowid}", "Your comment was posted.")


def reply_form(ctx: ForumContext) -> Response:
    p = _post(ctx)
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


# -------------------------------------------------------------------------------------------- writing


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
        (target["id"], user["id"], values["title"], values["body"][:40000], _next_time(ctx.db)),
    )
    # Postmill counts the author's own upvote on a new submission.
    ctx.db.execute(
        "INSERT INTO forum_post_votes (user_id, post_id, value) VALUES (?, ?, 1)",
        (user["id"], cursor.lastrowid),
    )
    return ctx.redirect(f"/f/{target['name']}/{cursor.lastrowid}", "Your post was created.")


def edit_post(ctx: ForumContext) -> Response:
    p = _post(ctx)
    user = ctx.require_user(f"{_post_url(p)}/edit")
    if user["id"] != p["user_id"]:
        raise HttpError(403, "Not allowed", "You can only edit your own posts.")
    page = {"page_title": "Edit post", "heading": "Edit post", "action": f"{_post_url(p)}/edit", "forums": []}
    if ctx.request.method == "GET":
        return ctx.render("post_form.html", values=dict(p), button="Save changes", **page)
    values = {"title": ctx.field("title"), "body": ctx.field("body")}
    if not values["title"] or len(values["title"]) > 300:
        return ctx.render(
            "post_form.html", 400, values=values, button="Save changes", error="Please enter a title.", **page
        )
    ctx.db.execute(
        "UPDATE forum_posts SET title = ?, body = ?, edited = ? WHERE id = ?",
        (values["title"], values["body"][:40000], _next_time(ctx.db), p["id"]),
    )
    return ctx.redirect(_post_url(p), "Your post was updated.")


def delete_post(ctx: ForumContext) -> Response:
    p = _post(ctx)
    user = ctx.require_user(_post_url(p))
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
        (values["name"], values["title"][:100], values["description"][:1000], _next_time(ctx.db)),
    )
    ctx.db.execute(
        "INSERT INTO forum_subscriptions (user_id, forum_id) VALUES (?, ?)", (user["id"], cursor.lastrowid)
    )
    return ctx.redirect(f"/f/{values['name']}", f"The forum /f/{values['name']} was created.")


# ---------------------------------------------------------------------------------------------- users


def user_page(ctx: ForumContext) -> Response:
    profile = ctx.db.execute(
        "SELECT * FROM forum_users WHERE username = ?", (ctx.request.path_params["username"],)
    ).fetchone()
    if profile is None:
        raise HttpError(404, "User not found", "There is no user with this name.")
    posts = ctx.db.execute(
        _POST_SELECT + " WHERE p.user_id = ? ORDER BY p.created DESC, p.id DESC", (profile["id"],)
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


def edit_biography(ctx: ForumContext) -> Response:
    user = ctx.require_user(here(ctx.request))
    if user["username"].lower() != ctx.request.path_params["username"].lower():
        raise HttpError(403, "Not allowed", "You can only edit your own biography.")
    if ctx.request.method == "GET":
        return ctx.render("edit_bio.html", page_title="Edit biography", bio=user["bio"])
    ctx.db.execute("UPDATE forum_users SET bio = ? WHERE id = ?", (ctx.field("bio")[:1000], user["id"]))
    return ctx.redirect(f"/user/{user['username']}", "Your biography was saved.")


def search(ctx: ForumContext) -> Response:
    query = ctx.query("q").strip()
    words = query.lower().split()
    posts: list[sqlite3.Row] = []
    if words:
        clauses = " AND ".join("(instr(lower(p.title), ?) > 0 OR instr(lower(p.body), ?) > 0)" for _ in words)
        params = [value for word in words for value in (word, word)]
        posts = ctx.db.execute(
            _POST_SELECT + f" WHERE {clauses} ORDER BY p.created DESC, p.id DESC LIMIT 50", params
        ).fetchall()
    return ctx.render("search.html", page_title=f'Search results for "{query}"', query=query, posts=posts)


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


ROUTES = [
    ("/", front, GET),
    ("/forums", forums, GET),
    ("/submit", submit, GET_POST),
    ("/create_forum", create_forum, GET_POST),
    ("/search", search, GET),
    ("/login", login, GET_POST),
    ("/registration", registration, GET_POST),
    ("/logout", logout, GET_POST),
    ("/user/{username}", user_page, GET),
    ("/user/{username}/edit_biography", edit_biography, GET_POST),
    ("/comment/{comment_id:int}/vote", vote_comment, POST),
    ("/f/{forum}", forum, GET),
    ("/f/{forum}/subscribe", subscribe, POST),
    ("/f/{forum}/{post_id:int}", post, GET),
    ("/f/{forum}/{post_id:int}/vote", vote_post, POST),
    ("/f/{forum}/{post_id:int}/comment", add_comment, POST),
    ("/f/{forum}/{post_id:int}/comment/{comment_id:int}/reply", reply_form, GET),
    ("/f/{forum}/{post_id:int}/edit", edit_post, GET_POST),
    ("/f/{forum}/{post_id:int}/delete", delete_post, POST),
]


def create_forum_app(dbs: Databases) -> Starlette:
    """The forum as a Starlette app over ``dbs`` (one database per ``X-AgentGym-Session`` token)."""
    return site_app(dbs, ForumContext, ROUTES)
