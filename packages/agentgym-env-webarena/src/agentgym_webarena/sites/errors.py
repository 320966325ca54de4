"""The exceptions a handler raises to answer with something other than its own page."""

from __future__ import annotations


class Redirect(Exception):
    """Raised by a handler to answer with a 303 redirect (e.g. to the login page)."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.url = url


class HttpError(Exception):
    """Raised by a handler to answer with an error page in the site's layout."""

    def __init__(self, status: int, title: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.title = title
        self.message = message
