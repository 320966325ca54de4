"""The forum's generated content (``forum_data()``): forums, users, posts, threaded comments, votes
and subscriptions, drawn from ``forum_words`` by one seeded generator; and ``FORUM_ACCOUNTS``, the
users' login credentials for task writers.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache

from .clock import SITE_NOW, iso, random_moment
from .forum_words import BODY_SENTENCES, COMMENT_SENTENCES, FORUMS, SLOTS, TITLE_TEMPLATES, USERS

FORUM_NAME = "Postmill"

# The forum's own seed: editing the shop's lists never changes the forum's data.
_FORUM_SEED = 61520230


@dataclass(frozen=True)
class Forum:
    id: int
    name: str
    title: str
    description: str
    created: str


@dataclass(frozen=True)
class User:
    id: int
    username: str
    password: str
    bio: str
    created: str


@dataclass(frozen=True)
class Post:
    id: int
    forum_id: int
    user_id: int
    title: str
    body: str
    created: str


@dataclass(frozen=True)
class Comment:
    id: int
    post_id: int
    parent_id: int | None
    user_id: int
    body: str
    created: str


@dataclass(frozen=True)
class Vote:
    user_id: int
    target_id: int  # a post id or a comment id, depending on the list it is in
    value: int  # +1 or -1


@dataclass(frozen=True)
class ForumData:
    forums: tuple[Forum, ...]
    users: tuple[User, ...]
    posts: tuple[Post, ...]
    comments: tuple[Comment, ...]
    post_votes: tuple[Vote, ...]
    comment_votes: tuple[Vote, ...]
    subscriptions: tuple[tuple[int, int], ...]  # (user id, forum id)


def _fill(template: str, rng: random.Random) -> str:
    return re.sub(r"\{(\w+)\}", lambda match: rng.choice(SLOTS[match.group(1)]), template)


def _forum_posts(rng: random.Random, forums: tuple[Forum, ...], users: tuple[User, ...]) -> tuple[Post, ...]:
    titles: set[str] = set()
    drafts_posts = []
    post_start, post_end = datetime(2023, 1, 2), SITE_NOW - timedelta(hours=3)
    for forum in forums:
        while sum(1 for draft in drafts_posts if draft[1] == forum.id) < 10:
            title = _fill(rng.choice(TITLE_TEMPLATES[forum.name]), rng)
            if title in titles:
                continue
            titles.add(title)
            body = " ".join(rng.sample(BODY_SENTENCES[forum.name], rng.randint(2, 4)))
            moment = random_moment(rng, post_start, post_end)
            drafts_posts.append((moment, forum.id, rng.choice(users).id, title, body))
    # Ids follow creation time, as they would on a live site.
    return tuple(
        Post(index, forum_id, user_id, title, body, iso(moment))
        for index, (moment, forum_id, user_id, title, body) in enumerate(sorted(drafts_posts), start=1)
    )


def _forum_comments(rng: random.Random, posts: tuple[Post, ...], users: tuple[User, ...]) -> list[Comment]:
    drafts_comments: list[tuple[datetime, int, int, str, int | None]] = []
    for _ in range(150):
        post = rng.choice(posts)
        posted = datetime.fromisoformat(post.created)
        moment = min(posted + timedelta(minutes=rng.randint(5, 60 * 72)), SITE_NOW - timedelta(minutes=30))
        author = rng.choice([user.id for user in users if user.id != post.user_id])
        body = " ".join(rng.sample(COMMENT_SENTENCES, rng.randint(1, 2)))
        drafts_comments.append((moment, post.id, author, body, None))
    drafts_comments.sort()
    comments: list[Comment] = []
    for moment, post_id, author, body, _ in drafts_comments:
        earlier = [comment for comment in comments if comment.post_id == post_id]
        # About a third of comments answer an earlier comment on the same post.
        parent = rng.choice(earlier).id if earlier and rng.random() < 0.35 else None
        comments.append(Comment(len(comments) + 1, post_id, parent, author, body, iso(moment)))
    return comments


def _forum_votes(
    rng: random.Random, posts: tuple[Post, ...], comments: list[Comment], users: tuple[User, ...]
) -> tuple[list[Vote], list[Vote]]:
    post_votes = []
    for post in posts:
        post_votes.append(Vote(post.user_id, post.id, 1))  # authors upvote their own posts, as on Postmill
        for user in users:
            if user.id != post.user_id and rng.random() < 0.5:
                post_votes.append(Vote(user.id, post.id, 1 if rng.random() < 0.8 else -1))
    comment_votes = []
    for comment in comments:
        for user in users:
            if user.id != comment.user_id and rng.random() < 0.2:
                comment_votes.append(Vote(user.id, comment.id, 1 if rng.random() < 0.75 else -1))
    return post_votes, comment_votes


@cache
def forum_data() -> ForumData:
    """The forum's whole generated content: forums, users, posts, comments, votes (same every call)."""
    # One generator drawn from in a fixed order (posts, comments, votes, subscriptions).
    rng = random.Random(_FORUM_SEED)
    forums = tuple(
        Forum(index, name, title, description, iso(datetime(2022, 11, index)))
        for index, (name, title, description) in enumerate(FORUMS, start=1)
    )
    users = tuple(
        User(index, username, _forum_password(username), bio, iso(datetime(2022, 11, 10 + index, 9)))
        for index, (username, bio) in enumerate(USERS, start=1)
    )
    posts = _forum_posts(rng, forums, users)
    comments = _forum_comments(rng, posts, users)
    post_votes, comment_votes = _forum_votes(rng, posts, comments, users)
    subscriptions = tuple(
        (user.id, forum_id)
        for user in users
        for forum_id in sorted(rng.sample([forum.id for forum in forums], rng.randint(1, 3)))
    )
    return ForumData(
        forums, users, posts, tuple(comments), tuple(post_votes), tuple(comment_votes), subscriptions
    )


def _forum_password(username: str) -> str:
    return f"{username}Pass1!"


FORUM_ACCOUNTS: list[dict[str, str]] = [
    {"username": username, "password": _forum_password(username)} for username, _ in USERS
]
