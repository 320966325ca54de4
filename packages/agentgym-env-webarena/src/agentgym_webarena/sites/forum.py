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
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .common import (
    Context,
    HttpError,
    Redirect,
    endpoint,
    here,
    html,
    login_url,
    make_templates,
    referer_path,
    safe_next,
    start_session,
)
from .data import FORUM_NAME, SITE_NOW
from .db import Databases, check_password, hash_password

SESSION_COOKIE = "forum_session"
SORTS = [("hot", "Hot"), ("new", "New"), ("top", "Top")]
_NAME_RE = re.compile(r"^[A-Za-z0-9_]{3,25}$")
_USERNAME_RE = re.compile(r"^[A-Za-z0-9_-]{3,25}$")

_CSS = """
body{font-family:system-ui,sans-serif;margin:0;color:#222;background:#f4f4f6}
header.top{display:flex;flex-wrap:wrap;gap:1rem;align-items:center;padding:.6rem 1.5rem;background:#2d2d4a;color:#fff}
header.top a{color:#fff}.brand{font-size:1.3rem;font-weight:bold;text-decoration:none}
header.top ul{list-style:none;display:flex;gap:1rem;margin:0;padding:0}main{padding:1rem 1.5rem;max-width:60rem}
article.post,article.comment{background:#fff;border:1px solid #ddd;padding:.5rem .75rem;margin:.5rem 0;border-radius:4px}
article.comment article.comment{margin-left:1.5rem}.meta{color:#555;font-size:.9rem}
[role=status]{background:#e5f6e5;padding:.5rem}[role=alert]{background:#fde8e8;padding:.5rem}
button[aria-pressed=true]{font-weight:bold;background:#ffd27f}label{display:block;margin-top:.5rem}
textarea{width:100%;max-width:40rem}.vh{position:absolute;width:1px;height:1px;overflow:hidden;
clip:rect(0 0 0 0);white-space:nowrap}form.inline{display:inline}
"""

TEMPLATES = {
    "layout.html": """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{% if page_title %}{{ page_title }} | {% endif %}{{ site_name }}</title>
<style>{{ css }}</style>
</head>
<body>
<header class="top">
  <a class="brand" href="/">{{ site_name }}</a>
  <nav aria-label="Main">
    <ul>
      <li><a href="/forums">Forums</a></li>
      <li><a href="/submit">Submit</a></li>
    {% if user %}
      <li><a href="/user/{{ user.username }}">{{ user.username }}</a></li>
      <li><a href="/logout">Log out</a></li>
    {% else %}
      <li><a href="/login">Log in</a></li>
      <li><a href="/registration">Sign up</a></li>
    {% endif %}
    </ul>
  </nav>
  <form role="search" action="/search" method="get">
    <label for="search-q" class="vh">Search</label>
    <input id="search-q" type="search" name="q" value="{{ query }}" placeholder="Search posts">
    <button type="submit">Search</button>
  </form>
</header>
<main>
{% if flash %}<p role="status">{{ flash }}</p>{% endif %}
{% if error %}<p role="alert">{{ error }}</p>{% endif %}
{% block content %}{% endblock %}
</main>
<footer><p>{{ site_name }}: a small community forum.</p></footer>
</body>
</html>
""",
    "macros.html": """{% macro post_card(p, show_forum=True) %}
<article class="post">
  <h2><a href="/f/{{ p.forum_name }}/{{ p.id }}">{{ p.title }}</a></h2>
  <p class="meta">Submitted by <a href="/user/{{ p.username }}">{{ p.username }}</a>{% if show_forum %} in <a href="/f/{{ p.forum_name }}">/f/{{ p.forum_name }}</a>{% endif %} on <time datetime="{{ p.created }}">{{ p.created|date_time }}</time></p>
  <p class="meta">Score: {{ p.score }} {{ "point" if p.score in (1, -1) else "points" }} &middot; <a href="/f/{{ p.forum_name }}/{{ p.id }}#comments">{{ p.comment_count }} {{ "comment" if p.comment_count == 1 else "comments" }}</a></p>
</article>
{% endmacro %}
{% macro sort_links(base, current) %}
<p>Sort by:
{% for key, label in sorts %}
  {% if key == current %}<strong aria-current="true">{{ label }}</strong>{% else %}<a href="{{ base }}?sort={{ key }}">{{ label }}</a>{% endif %}{{ " |" if not loop.last }}
{% endfor %}
</p>
{% endmacro %}
{% macro vote_buttons(action, mine, what) %}
<form class="inline" method="post" action="{{ action }}">
  <button type="submit" name="direction" value="up" aria-pressed="{{ 'true' if mine == 1 else 'false' }}"{% if what %} aria-label="Upvote {{ what }}"{% endif %}>Upvote</button>
  <button type="submit" name="direction" value="down" aria-pressed="{{ 'true' if mine == -1 else 'false' }}"{% if what %} aria-label="Downvote {{ what }}"{% endif %}>Downvote</button>
</form>
{% endmacro %}
{% macro comment_tree(c, children, my_votes, post, user) %}
<article class="comment" id="comment-{{ c.id }}">
  <p class="meta"><a href="/user/{{ c.username }}">{{ c.username }}</a> &middot; <time datetime="{{ c.created }}">{{ c.created|date_time }}</time> &middot; Score: {{ c.score }} {{ "point" if c.score in (1, -1) else "points" }}</p>
  <p>{{ c.body }}</p>
  {{ vote_buttons("/comment/%d/vote"|format(c.id), my_votes.get(c.id, 0), "comment %d"|format(c.id)) }}
  <a href="/f/{{ post.forum_name }}/{{ post.id }}/comment/{{ c.id }}/reply">Reply<span class="vh"> to comment {{ c.id }}</span></a>
  {% for child in children.get(c.id, []) %}{{ comment_tree(child, children, my_votes, post, user) }}{% endfor %}
</article>
{% endmacro %}
""",
    "front.html": """{% extends "layout.html" %}
{% from "macros.html" import post_card, sort_links with context %}
{% block content %}
<h1>{{ heading }}</h1>
{{ sort_links("/", sort) }}
{% for p in posts %}{{ post_card(p) }}{% endfor %}
<section aria-labelledby="forums-h">
  <h2 id="forums-h">Forums</h2>
  <ul>
  {% for f in forums %}<li><a href="/f/{{ f.name }}">/f/{{ f.name }}</a></li>{% endfor %}
  </ul>
  <p><a href="/create_forum">Create a forum</a></p>
</section>
{% endblock %}
""",
    "forums.html": """{% extends "layout.html" %}
{% block content %}
<h1>List of forums</h1>
<ul>
{% for f in forums %}
  <li><a href="/f/{{ f.name }}">/f/{{ f.name }}</a>: {{ f.title }}. {{ f.description }} ({{ f.post_count }} {{ "post" if f.post_count == 1 else "posts" }}, {{ f.subscriber_count }} {{ "subscriber" if f.subscriber_count == 1 else "subscribers" }})</li>
{% endfor %}
</ul>
<p><a href="/create_forum">Create a forum</a></p>
{% endblock %}
""",
    "forum.html": """{% extends "layout.html" %}
{% from "macros.html" import post_card, sort_links with context %}
{% block content %}
<h1>/f/{{ forum.name }}</h1>
<p>{{ forum.title }}: {{ forum.description }}</p>
<p>{{ subscriber_count }} {{ "subscriber" if subscriber_count == 1 else "subscribers" }}</p>
<form method="post" action="/f/{{ forum.name }}/subscribe">
  <button type="submit">{{ "Unsubscribe" if subscribed else "Subscribe" }}</button>
</form>
<p><a href="/submit?forum={{ forum.name }}">Submit a new post</a></p>
{{ sort_links("/f/" ~ forum.name, sort) }}
{% for p in posts %}{{ post_card(p, False) }}{% else %}<p>There are no posts in this forum yet.</p>{% endfor %}
{% endblock %}
""",
    "post.html": """{% extends "layout.html" %}
{% from "macros.html" import vote_buttons, comment_tree with context %}
{% block content %}
<p><a href="/f/{{ post.forum_name }}">/f/{{ post.forum_name }}</a></p>
<article class="post">
  <h1>{{ post.title }}</h1>
  <p class="meta">Submitted by <a href="/user/{{ post.username }}">{{ post.username }}</a> on <time datetime="{{ post.created }}">{{ post.created|date_time }}</time>{% if post.edited %} (edited {{ post.edited|date_time }}){% endif %}</p>
  {% for para in paragraphs %}<p>{{ para }}</p>{% endfor %}
  <p>Score: {{ post.score }} {{ "point" if post.score in (1, -1) else "points" }}</p>
  {{ vote_buttons("/f/%s/%d/vote"|format(post.forum_name, post.id), my_vote, "") }}
  {% if user and user.id == post.user_id %}
  <p><a href="/f/{{ post.forum_name }}/{{ post.id }}/edit">Edit post</a></p>
  <form method="post" action="/f/{{ post.forum_name }}/{{ post.id }}/delete"><button type="submit">Delete post</button></form>
  {% endif %}
</article>
<section aria-labelledby="comments">
  <h2 id="comments">{{ comment_count }} {{ "comment" if comment_count == 1 else "comments" }}</h2>
  {% if user %}
  <form method="post" action="/f/{{ post.forum_name }}/{{ post.id }}/comment">
    <label for="comment">Comment</label>
    <textarea id="comment" name="body" rows="4" required></textarea>
    <button type="submit">Post comment</button>
  </form>
  {% else %}
  <p><a href="{{ login_link }}">Log in to comment</a></p>
  {% endif %}
  {% for c in children.get(None, []) %}{{ comment_tree(c, children, my_comment_votes, post, user) }}{% endfor %}
</section>
{% endblock %}
""",
    "reply.html": """{% extends "layout.html" %}
{% block content %}
<p><a href="/f/{{ post.forum_name }}/{{ post.id }}">Back to the post: {{ post.title }}</a></p>
<h1>Reply to {{ comment.username }}'s comment</h1>
<blockquote><p>{{ comment.body }}</p></blockquote>
{% if user %}
<form method="post" action="/f/{{ post.forum_name }}/{{ post.id }}/comment">
  <input type="hidden" name="parent_id" value="{{ comment.id }}">
  <label for="comment">Comment</label>
  <textarea id="comment" name="body" rows="4" required></textarea>
  <button type="submit">Post comment</button>
</form>
{% else %}
<p><a href="{{ login_link }}">Log in to reply</a></p>
{% endif %}
{% endblock %}
""",
    "post_form.html": """{% extends "layout.html" %}
{% block content %}
<h1>{{ heading }}</h1>
<form method="post" action="{{ action }}">
  {% if forums %}
  <label for="post-forum">Forum</label>
  <select id="post-forum" name="forum">
  {% for f in forums %}
    <option value="{{ f.name }}"{% if f.name == values.forum %} selected{% endif %}>{{ f.name }}</option>
  {% endfor %}
  </select>
  {% endif %}
  <label for="post-title">Title</label>
  <input id="post-title" name="title" required maxlength="300" value="{{ values.title }}">
  <label for="post-body">Body</label>
  <textarea id="post-body" name="body" rows="8">{{ values.body }}</textarea>
  <button type="submit">{{ button }}</button>
</form>
{% endblock %}
""",
    "create_forum.html": """{% extends "layout.html" %}
{% block content %}
<h1>Create forum</h1>
<form method="post" action="/create_forum">
  <label for="forum-name">Name</label>
  <input id="forum-name" name="name" required pattern="[A-Za-z0-9_]{3,25}" value="{{ values.name }}">
  <label for="forum-title">Title</label>
  <input id="forum-title" name="title" required maxlength="100" value="{{ values.title }}">
  <label for="forum-description">Description</label>
  <textarea id="forum-description" name="description" rows="3">{{ values.description }}</textarea>
  <button type="submit">Create forum</button>
</form>
{% endblock %}
""",
    "user.html": """{% extends "layout.html" %}
{% from "macros.html" import post_card with context %}
{% block content %}
<h1>{{ profile.username }}</h1>
<p>{{ profile.bio or "This user has not written a biography." }}</p>
{% if user and user.id == profile.id %}<p><a href="/user/{{ profile.username }}/edit_biography">Edit biography</a></p>{% endif %}
<p>Karma: {{ karma }}</p>
<p>Registered on {{ profile.created|long_date }}</p>
<section aria-labelledby="posts-h">
  <h2 id="posts-h">Posts ({{ posts|length }})</h2>
  {% for p in posts %}{{ post_card(p) }}{% else %}<p>No posts yet.</p>{% endfor %}
</section>
<section aria-labelledby="comments-h">
  <h2 id="comments-h">Comments ({{ comments|length }})</h2>
  {% for c in comments %}
  <article class="comment">
    <p class="meta">On <a href="/f/{{ c.forum_name }}/{{ c.post_id }}#comment-{{ c.id }}">{{ c.post_title }}</a> &middot; <time datetime="{{ c.created }}">{{ c.created|date_time }}</time> &middot; Score: {{ c.score }} {{ "point" if c.score in (1, -1) else "points" }}</p>
    <p>{{ c.body }}</p>
  </article>
  {% else %}
  <p>No comments yet.</p>
  {% endfor %}
</section>
{% endblock %}
""",
    "edit_bio.html": """{% extends "layout.html" %}
{% block content %}
<h1>Edit biography</h1>
<form method="post" action="/user/{{ user.username }}/edit_biography">
  <label for="bio">Biography</label>
  <textarea id="bio" name="bio" rows="5" maxlength="1000">{{ bio }}</textarea>
  <button type="submit">Save</button>
</form>
{% endblock %}
""",
    "search.html": """{% extends "layout.html" %}
{% from "macros.html" import post_card with context %}
{% block content %}
<h1>Search results for "{{ query }}"</h1>
{% for p in posts %}{{ post_card(p) }}{% else %}<p>{{ "No posts match your search." if query else "Enter a word to search for." }}</p>{% endfor %}
{% endblock %}
""",
    "login.html": """{% extends "layout.html" %}
{% block content %}
<h1>Log in</h1>
<form method="post" action="/login">
  <input type="hidden" name="next" value="{{ next }}">
  <label for="login-username">Username</label>
  <input id="login-username" name="username" autocomplete="username" required value="{{ username }}">
  <label for="login-password">Password</label>
  <input id="login-password" name="password" type="password" autocomplete="current-password" required>
  <button type="submit">Log in</button>
</form>
<p>No account? <a href="/registration">Sign up</a></p>
{% endblock %}
""",
    "registration.html": """{% extends "layout.html" %}
{% block content %}
<h1>Sign up</h1>
<form method="post" action="/registration">
  <label for="reg-username">Username</label>
  <input id="reg-username" name="username" required pattern="[A-Za-z0-9_\\-]{3,25}" value="{{ username }}">
  <label for="reg-password">Password</label>
  <input id="reg-password" name="password" type="password" required minlength="6">
  <button type="submit">Sign up</button>
</form>
{% endblock %}
""",
    "error.html": """{% extends "layout.html" %}
{% block content %}
<h1>{{ heading }}</h1>
<p>{{ message }}</p>
<p><a href="/">Go to the front page</a></p>
{% endblock %}
""",
}

_env = make_templates(TEMPLATES, site_name=FORUM_NAME, css=_CSS, sorts=SORTS)

# Posts with what a listing shows; callers append WHERE and ORDER BY.
_POST_SELECT = """
SELECT p.*, f.name AS forum_name, u.username,
       (SELECT COUNT(*) FROM forum_comments c WHERE c.post_id = p.id) AS comment_count
FROM forum_posts p JOIN forum_forums f ON f.id = p.forum_id JOIN forum_users u ON u.id = p.user_id
"""


class ForumContext(Context):
    flash_cookie = "forum_flash"

    def __init__(self, request: Request, db: sqlite3.Connection, form: dict[str, str]) -> None:
        super().__init__(request, db, form)
        self.user: sqlite3.Row | None = None
        token = request.cookies.get(SESSION_COOKIE)
        if token:
            self.user = db.execute(
                "SELECT u.* FROM sessions s JOIN forum_users u ON u.id = s.user_id "
                "WHERE s.token = ? AND s.site = 'forum'",
                (token,),
            ).fetchone()

    def require_user(self, back: str | None = None) -> sqlite3.Row:
        if self.user is None:
            target = back or (
                here(self.request) if self.request.method == "GET" else referer_path(self.request, "/")
            )
            raise Redirect(login_url("/login", target))
        return self.user

    def render(self, template: str, status: int = 200, **values: Any) -> Response:
        values.setdefault("page_title", "")
        values.setdefault("error", None)
        values.setdefault("query", "")
        page = _env.get_template(template).render(user=self.user, flash=self.flash, **values)
        return html(page, status)


def _render_error(ctx: Context | None, error: HttpError) -> Response:
    if isinstance(ctx, ForumContext):
        return ctx.render(
            "error.html", error.status, page_title=error.title, heading=error.title, message=error.message
        )
    page = _env.get_template("error.html").render(
        page_title=error.title,
        heading=error.title,
        message=error.message,
        user=None,
        flash=None,
        error=None,
        query="",
    )
    return html(page, error.status)


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
        login_link=login_url("/login", _post_url(p)),
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
        login_link=login_url("/login", here(ctx.request)),
    )


# -------------------------------------------------------------------------------------------- writing


def submit(ctx: ForumContext) -> Response:
    user = ctx.require_user("/submit")
    all_forums = ctx.db.execute("SELECT * FROM forum_forums ORDER BY name").fetchall()
    if ctx.request.method == "GET":
        values = {"forum": ctx.query("forum"), "title": "", "body": ""}
        return ctx.render(
            "post_form.html",
            page_title="Create submission",
            heading="Create submission",
            action="/submit",
            forums=all_forums,
            values=values,
            button="Create post",
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
        return ctx.render(
            "post_form.html",
            400,
            page_title="Create submission",
            heading="Create submission",
            action="/submit",
            forums=all_forums,
            values=values,
            button="Create post",
            error=error,
        )
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


def _sign_in(ctx: ForumContext, user_id: int) -> None:
    start_session(ctx, "forum", user_id, SESSION_COOKIE)


def login(ctx: ForumContext) -> Response:
    next_url = safe_next(ctx.form.get("next") or ctx.query("next"), "/")
    if ctx.request.method == "GET":
        if ctx.user is not None:
            return ctx.redirect(next_url)
        return ctx.render("login.html", page_title="Log in", next=next_url, username="")
    username = ctx.field("username")
    row = ctx.db.execute("SELECT * FROM forum_users WHERE username = ?", (username,)).fetchone()
    if row is None or not check_password(ctx.form.get("password", ""), row["password_hash"]):
        return ctx.render(
            "login.html",
            401,
            page_title="Log in",
            next=next_url,
            username=username,
            error="Invalid username or password.",
        )
    _sign_in(ctx, row["id"])
    return ctx.redirect(next_url)


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
    _sign_in(ctx, int(cursor.lastrowid or 0))
    return ctx.redirect("/", f"Welcome to {FORUM_NAME}, {username}!")


def logout(ctx: ForumContext) -> Response:
    token = ctx.request.cookies.get(SESSION_COOKIE)
    if token:
        ctx.db.execute("DELETE FROM sessions WHERE token = ? AND site = 'forum'", (token,))
    ctx.delete_cookie(SESSION_COOKIE)
    return ctx.redirect("/", "You are logged out.")


def not_found(ctx: ForumContext) -> Response:
    raise HttpError(404, "Page not found", "The page you requested was not found.")


def create_forum_app(dbs: Databases) -> Starlette:
    """The forum as a Starlette app over ``dbs`` (one database per ``X-AgentGym-Session`` token)."""

    def route(path: str, handler: Any, methods: list[str] | None = None) -> Route:
        return Route(path, endpoint(dbs, ForumContext, handler, _render_error), methods=methods or ["GET"])

    routes = [
        route("/", front),
        route("/forums", forums),
        route("/submit", submit, ["GET", "POST"]),
        route("/create_forum", create_forum, ["GET", "POST"]),
        route("/search", search),
        route("/login", login, ["GET", "POST"]),
        route("/registration", registration, ["GET", "POST"]),
        route("/logout", logout, ["GET", "POST"]),
        route("/user/{username}", user_page),
        route("/user/{username}/edit_biography", edit_biography, ["GET", "POST"]),
        route("/comment/{comment_id:int}/vote", vote_comment, ["POST"]),
        route("/f/{forum}", forum),
        route("/f/{forum}/subscribe", subscribe, ["POST"]),
        route("/f/{forum}/{post_id:int}", post),
        route("/f/{forum}/{post_id:int}/vote", vote_post, ["POST"]),
        route("/f/{forum}/{post_id:int}/comment", add_comment, ["POST"]),
        route("/f/{forum}/{post_id:int}/comment/{comment_id:int}/reply", reply_form),
        route("/f/{forum}/{post_id:int}/edit", edit_post, ["GET", "POST"]),
        route("/f/{forum}/{post_id:int}/delete", delete_post, ["POST"]),
        # Last: any other URL gets a 404 page with the full layout, so the visitor can navigate on.
        Route("/{path:path}", endpoint(dbs, ForumContext, not_found, _render_error)),
    ]
    return Starlette(routes=routes)
