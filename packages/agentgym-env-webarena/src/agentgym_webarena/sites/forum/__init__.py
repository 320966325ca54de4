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

The handlers live by what they do (``reading``, ``writing``, ``votes``, ``accounts``) over the
request type in ``context``; this module puts them on their routes.
"""

from __future__ import annotations

from starlette.applications import Starlette

from ..app import GET, GET_POST, POST, site_app
from ..db import Databases
from .accounts import edit_biography, login, logout, registration
from .context import ForumContext
from .reading import forum, forums, front, post, reply_form, search, user_page
from .votes import vote_comment, vote_post
from .writing import add_comment, create_forum, delete_post, edit_post, submit, subscribe

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
