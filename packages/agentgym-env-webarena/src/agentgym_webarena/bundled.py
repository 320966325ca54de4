"""Signing in to the bundled sites, as WebArena's tasks with ``require_login`` expect.

WebArena logs in once with its auto-login script and reuses the saved cookies; the bundled sites are
fresh per session, so the env posts the site's own login form through the context's request API
(the cookies land in the context). The account is the task's ``agentgym.login`` (an email for the
shop, a username for the forum), else the site's first account.
"""

from __future__ import annotations

from typing import Any

from agentgym_webarena.evaluators import TaskConfigError


def account(site: str, config: dict[str, Any]) -> dict[str, str]:
    from agentgym_webarena.sites import FORUM_ACCOUNTS, SHOP_ACCOUNTS

    accounts, key = (SHOP_ACCOUNTS, "email") if site == "shopping" else (FORUM_ACCOUNTS, "username")
    wanted = (config.get("agentgym") or {}).get("login")
    if isinstance(wanted, dict):
        wanted = wanted.get(site)
    if not wanted:
        return accounts[0]
    for a in accounts:
        if a[key] == wanted:
            return a
    raise TaskConfigError(
        f"no bundled {site} account {wanted!r} (accounts: {', '.join(a[key] for a in accounts)})"
    )


async def sign_in(request: Any, site: str, base_url: str, config: dict[str, Any]) -> None:
    who = account(site, config)
    if site == "shopping":
        form = {"email": who["email"], "password": who["password"]}
    else:
        form = {"username": who["username"], "password": who["password"]}
    reply = await request.post(f"{base_url}/login", form=form, max_redirects=0)
    if reply.status not in (200, 302, 303):
        raise TaskConfigError(
            f"signing in to the bundled {site} as {form.get('email') or form.get('username')} failed: HTTP {reply.status}"
        )
