"""``agentgym webarena ...``: the bundled sites for a person to browse."""

from __future__ import annotations

import time

import click


@click.group()
def webarena() -> None:
    """The webarena env's tools."""


@webarena.command("sites")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (loopback by default).")
@click.option(
    "--shop-port", default=7770, show_default=True, type=click.IntRange(0, 65535), help="The shop's port."
)
@click.option(
    "--forum-port", default=9999, show_default=True, type=click.IntRange(0, 65535), help="The forum's port."
)
def sites(host: str, shop_port: int, forum_port: int) -> None:
    """Serve the bundled shop and forum (one shared database, the pristine data) until Ctrl-C.

    The envs start their own copies on free ports, one database per session; these are for looking
    around, or for pointing an env at with SHOPPING=... REDDIT=... (then all its sessions share
    this database).
    """
    from agentgym.server.run import is_loopback
    from agentgym_webarena.sites import FORUM_ACCOUNTS, SHOP_ACCOUNTS
    from agentgym_webarena.sites.server import SiteServer

    if not is_loopback(host):
        raise click.UsageError("the bundled sites have no access control: serve them on loopback only")
    try:
        server = SiteServer(host=host, ports={"shopping": shop_port, "reddit": forum_port}).start()
    except OSError as exc:
        raise click.UsageError(f"cannot bind {host}: {exc.strerror or exc} (choose other ports)") from None
    shop, forum = server.urls["shopping"], server.urls["reddit"]
    click.echo(
        f"shop (SHOPPING):  {shop}   sign in as {SHOP_ACCOUNTS[0]['email']} / {SHOP_ACCOUNTS[0]['password']}"
    )
    click.echo(
        f"forum (REDDIT):   {forum}   log in as {FORUM_ACCOUNTS[0]['username']} / {FORUM_ACCOUNTS[0]['password']}"
    )
    click.echo("Ctrl-C stops", err=True)
    try:
        while server.running:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
