"""Password hashes as the sites store them: salted SHA-256 (``hash_password``/``check_password``).

This is a toy site, but it should not look like one in its own database.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets


def hash_password(password: str, salt: str | None = None) -> str:
    """``sha256$<salt>$<hex digest>``; a fresh random salt unless one is given (the pristine data's are fixed)."""
    salt = secrets.token_hex(8) if salt is None else salt
    digest = hashlib.sha256(f"{salt}:{password}".encode()).hexdigest()
    return f"sha256${salt}${digest}"


def check_password(password: str, stored: str) -> bool:
    """Whether ``password`` matches a ``hash_password`` string."""
    try:
        _, salt, _ = stored.split("$", 2)
    except ValueError:
        return False
    return hmac.compare_digest(hash_password(password, salt), stored)
