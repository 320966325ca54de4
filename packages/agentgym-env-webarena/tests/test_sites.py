"""The bundled shop and forum over real HTTP (no browser): a SiteServer on loopback, driven with httpx.

Each test works in its own session database (its own ``X-AgentGym-Session`` token), so the tests
are independent of each other and of their order.
"""

from __future__ import annotations

import re
import sqlite3
import uuid
from collections.abc import Iterator
from html.parser import HTMLParser
from importlib import resources

import httpx
import pytest
from agentgym_webarena.sites import FORUM_ACCOUNTS, SHOP_ACCOUNTS, SHOP_NAME
from agentgym_webarena.sites.db import Databases
from agentgym_webarena.sites.forum import ForumContext
from agentgym_webarena.sites.pristine import build_pristine
from agentgym_webarena.sites.schema import TABLES
from agentgym_webarena.sites.server import SiteServer
from agentgym_webarena.sites.shop import ShopContext

EMMA = SHOP_ACCOUNTS[0]
FOX = FORUM_ACCOUNTS[0]


@pytest.fixture(scope="module")
def sites() -> Iterator[SiteServer]:
    server = SiteServer().start()
    yield server
    server.stop()
    server.databases.close()


@pytest.fixture
def token(sites: SiteServer) -> Iterator[str]:
    name = uuid.uuid4().hex
    sites.databases.open(name)
    yield name
    sites.databases.drop(name)


def client(sites: SiteServer, site: str, token: str | None) -> httpx.Client:
    headers = {"X-AgentGym-Session": token} if token else {}
    return httpx.Client(base_url=sites.urls[site], headers=headers, follow_redirects=True, timeout=10)


@pytest.fixture
def shop(sites: SiteServer, token: str) -> Iterator[httpx.Client]:
    with client(sites, "shopping", token) as c:
        yield c


@pytest.fixture
def forum(sites: SiteServer, token: str) -> Iterator[httpx.Client]:
    with client(sites, "reddit", token) as c:
        yield c


def h1(page: str) -> str:
    headings = re.findall(r"<h1[^>]*>(.*?)</h1>", page, re.S)
    assert len(headings) == 1, headings
    return headings[0].strip()


def status(page: str) -> str:
    found = re.search(r'role="status">(.*?)<', page, re.S)
    return found.group(1) if found else ""


def shop_login(shop: httpx.Client, account: dict[str, str] = EMMA) -> httpx.Response:
    return shop.post("/login", data={"email": account["email"], "password": account["password"]})


def forum_login(forum: httpx.Client, account: dict[str, str] = FOX) -> httpx.Response:
    return forum.post("/login", data={"username": account["username"], "password": account["password"]})


class _FormAudit(HTMLParser):
    """Collects the form controls that would have no accessible name, and the page's landmarks."""

    def __init__(self) -> None:
        super().__init__()
        self.labels: set[str] = set()
        self.controls: list[tuple[str, dict[str, str | None]]] = []
        self.tags: set[str] = set()
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags.add(tag)
        self._in_title = tag == "title"
        if tag == "label" and a.get("for"):
            self.labels.add(str(a["for"]))
        if tag in ("input", "select", "textarea") and a.get("type") != "hidden":
            self.controls.append((tag, a))

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data

    def handle_endtag(self, tag: str) -> None:
        self._in_title = False

    def unnamed(self) -> list[str]:
        return [
            f"{tag} {a}"
            for tag, a in self.controls
            if not a.get("aria-label") and a.get("id") not in self.labels
        ]


def audit(page: str, site_name: str) -> None:
    parser = _FormAudit()
    parser.feed(page)
    assert parser.unnamed() == []
    assert {"nav", "main"} <= parser.tags
    assert site_name in parser.title
    h1(page)


# ----------------------------------------------------------------------------------------------- shop


SHOP_PAGES = [
    ("/", "Welcome to One Stop Market"),
    ("/category/electronics", "Electronics"),
    ("/category/books?sort=price_desc", "Books"),
    ("/search?q=earbuds", "Search results for: &#39;earbuds&#39;"),
    ("/product/lumina-wireless-earbuds-s3", "Lumina Wireless Earbuds S3"),
    ("/cart", "Shopping Cart"),
    ("/login", "Customer Login"),
    ("/register", "Create New Customer Account"),
]


@pytest.mark.parametrize(("path", "heading"), SHOP_PAGES)
def test_shop_pages_render(shop: httpx.Client, path: str, heading: str) -> None:
    reply = shop.get(path)
    assert reply.status_code == 200
    assert h1(reply.text) == heading
    audit(reply.text, SHOP_NAME)


def test_shop_account_pages_render_when_signed_in(shop: httpx.Client) -> None:
    shop_login(shop)
    for path, heading in [
        ("/account", "My Account"),
        ("/account/edit", "Edit Account Information"),
        ("/account/orders", "My Orders"),
        ("/account/wishlist", "My Wish List"),
        ("/product/lumina-wireless-earbuds-s3", "Lumina Wireless Earbuds S3"),
    ]:
        reply = shop.get(path)
        assert reply.status_code == 200, path
        assert h1(reply.text) == heading
        audit(reply.text, SHOP_NAME)
    assert "Submit review" in shop.get("/product/lumina-wireless-earbuds-s3").text


def test_shop_unknown_pages_are_404_with_navigation(shop: httpx.Client) -> None:
    for path in ["/nowhere", "/product/no-such-thing", "/category/no-such-category"]:
        reply = shop.get(path)
        assert reply.status_code == 404
        assert "/category/electronics" in reply.text  # the category nav is still there


def test_search_finds_a_product_by_a_word_of_its_name(shop: httpx.Client) -> None:
    page = shop.get("/search", params={"q": "EARBUDS"}).text
    assert ">Lumina Wireless Earbuds S3</a>" in page
    assert "No products match" not in page
    page = shop.get("/search", params={"q": "zyzzyva"}).text
    assert "No products match &#34;zyzzyva&#34;." in page


def test_category_sort_by_price(shop: httpx.Client) -> None:
    page = shop.get("/category/electronics", params={"sort": "price_asc"}).text
    prices = [float(p.replace(",", "")) for p in re.findall(r'class="price">\$([\d,.]+)<', page)]
    assert len(prices) == 8 and prices == sorted(prices)


def test_shop_login(shop: httpx.Client) -> None:
    bad = shop.post("/login", data={"email": EMMA["email"], "password": "wrong"})
    assert bad.status_code == 401
    assert 'role="alert"' in bad.text
    assert "shop_session" not in shop.cookies
    good = shop_login(shop)
    assert good.status_code == 200 and h1(good.text) == "My Account"
    assert "shop_session" in shop.cookies
    assert EMMA["email"] in good.text
    assert h1(shop.get("/logout").text).startswith("Welcome")
    assert shop.get("/account", follow_redirects=False).status_code == 303


def test_login_required_pages_redirect_to_login_with_next(shop: httpx.Client) -> None:
    reply = shop.get("/checkout", follow_redirects=False)
    assert reply.status_code == 303
    assert reply.headers["location"] == "/login?next=%2Fcheckout"


def test_add_to_cart_then_checkout_creates_an_order(
    sites: SiteServer, shop: httpx.Client, token: str
) -> None:
    page = shop.post(
        "/cart/add", data={"product_id": "1", "qty": "2", "back": "/product/lumina-wireless-earbuds-s3"}
    )
    assert status(page.text) == "You added 2 \u00d7 Lumina Wireless Earbuds S3 to your shopping cart."
    assert "My Cart (2 items)" in page.text
    cart = shop.get("/cart").text
    assert ">Lumina Wireless Earbuds S3</a>" in cart and 'value="2"' in cart and "Subtotal: $122.98" in cart

    # The guest cart follows the customer into their account; checkout is behind the login.
    shop.post("/login", data={"email": EMMA["email"], "password": EMMA["password"], "next": "/checkout"})
    checkout = shop.get("/checkout")
    assert h1(checkout.text) == "Checkout" and 'value="742 Maple Street"' in checkout.text
    form = {
        "ship_name": "Emma Lopez",
        "street": "1 Elm St",
        "city": "Springfield",
        "state": "IL",
        "zip": "62704",
    }
    form |= {"country": "United States", "phone": "217-555-0142"}
    done = shop.post("/checkout", data=form)
    assert status(done.text).startswith("Thank you for your order")
    number = re.search(r"<h1>Order # (\d{9})</h1>", done.text).group(1)  # type: ignore[union-attr]
    assert "Status: Pending" in done.text and "Grand total: $127.98" in done.text
    history = shop.get("/account/orders").text
    assert f"<td>{number}</td>" in history
    assert "You have no items in your shopping cart." in shop.get("/cart").text

    with sites.databases.connect(token) as db:
        row = db.execute("SELECT status, total_cents FROM shop_orders WHERE number = ?", (number,)).fetchone()
        assert tuple(row) == ("Pending", 12798)
        assert db.execute("SELECT COUNT(*) FROM shop_cart_items").fetchone()[0] == 0


def test_cart_update_and_remove(shop: httpx.Client) -> None:
    shop.post("/cart/add", data={"product_id": "1"})
    shop.post("/cart/add", data={"product_id": "2", "qty": "3"})
    page = shop.post("/cart/update", data={"qty_1": "4", "qty_2": "3"}).text
    assert "My Cart (7 items)" in page
    page = shop.post("/cart/remove", data={"product_id": "1"}).text
    assert (
        "My Cart (3 items)" in page
        and "Lumina Wireless Earbuds S3" not in page.split("<main>")[1].split("</p>", 1)[1]
    )


def test_write_a_review(shop: httpx.Client) -> None:
    shop_login(shop)
    page = shop.post(
        "/product/lumina-wireless-earbuds-s3/review",
        data={"title": "Tiny & loud", "rating": "5", "body": "<b>Yes</b>"},
    ).text
    assert "Tiny &amp; loud" in page and "&lt;b&gt;Yes&lt;/b&gt;" in page
    assert "Customer reviews (4)" in page and "Rating: 5 out of 5 stars" in page


# ---------------------------------------------------------------------------------------------- forum


FORUM_PAGES = [
    ("/", "Front page"),
    ("/?sort=new", "Front page"),
    ("/forums", "List of forums"),
    ("/f/books", "/f/books"),
    ("/f/books?sort=top", "/f/books"),
    ("/user/quietfox", "quietfox"),
    ("/login", "Log in"),
    ("/registration", "Sign up"),
    ("/search?q=trip", 'Search results for "trip"'),
]


@pytest.mark.parametrize(("path", "heading"), FORUM_PAGES)
def test_forum_pages_render(forum: httpx.Client, path: str, heading: str) -> None:
    reply = forum.get(path)
    assert reply.status_code == 200
    assert h1(reply.text) == heading
    audit(reply.text, "Postmill")


def _first_post(forum: httpx.Client, name: str = "books") -> tuple[str, str]:
    """(url, title) of the newest post of a forum."""
    found = re.search(rf'<h2><a href="(/f/{name}/\d+)">(.*?)</a></h2>', forum.get(f"/f/{name}?sort=new").text)
    assert found is not None
    return found.group(1), found.group(2)


def _score(page: str) -> int:
    return int(re.search(r"<p>Score: (-?\d+) points?</p>", page).group(1))  # type: ignore[union-attr]


def test_forum_post_page_and_voting(forum: httpx.Client) -> None:
    url, title = _first_post(forum)
    page = forum.get(url).text
    assert h1(page) == title
    audit(page, "Postmill")
    assert (
        forum.post(url + "/vote", data={"direction": "up"}, follow_redirects=False)
        .headers["location"]
        .startswith("/login?next=")
    )

    forum_login(forum, FORUM_ACCOUNTS[5])
    page = forum.get(url).text
    audit(page, "Postmill")
    before = _score(page)
    mine = re.search(r'value="up" aria-pressed="(true|false)"', page).group(1)  # type: ignore[union-attr]
    up = forum.post(url + "/vote", data={"direction": "up"}).text
    # Upvoting toggles: it adds an upvote, or takes back one already there.
    assert _score(up) == before + (-1 if mine == "true" else 1)
    down = forum.post(url + "/vote", data={"direction": "down"}).text
    assert _score(down) == before - (2 if mine == "true" else 1)
    assert 'value="down" aria-pressed="true"' in down


def test_forum_comment_reply_and_new_post(sites: SiteServer, forum: httpx.Client, token: str) -> None:
    url, _ = _first_post(forum, "science")
    assert forum_login(forum).status_code == 200
    page = forum.post(url + "/comment", data={"body": "Great <script>alert(1)</script> post"}).text
    assert status(page) == "Your comment was posted."
    assert "Great &lt;script&gt;alert(1)&lt;/script&gt; post" in page
    comment_id = max(int(i) for i in re.findall(r'id="comment-(\d+)"', page))
    reply_page = forum.get(f"{url}/comment/{comment_id}/reply").text
    assert h1(reply_page) == "Reply to quietfox's comment"
    page = forum.post(url + "/comment", data={"body": "A reply", "parent_id": str(comment_id)}).text
    assert "A reply" in page

    created = forum.post(
        "/submit", data={"forum": "travel", "title": "Night trains in Europe", "body": "Tips?"}
    )
    assert h1(created.text) == "Night trains in Europe"
    assert re.fullmatch(r"/f/travel/\d+", created.url.path)
    assert "Night trains in Europe" in forum.get("/f/travel?sort=new").text
    assert "Night trains in Europe" in forum.get("/user/quietfox").text

    with sites.databases.connect(token) as db:
        row = db.execute(
            "SELECT c.parent_id, u.username FROM forum_comments c JOIN forum_users u ON u.id = c.user_id "
            "WHERE c.body = 'A reply'"
        ).fetchone()
        assert tuple(row) == (comment_id, "quietfox")


def test_forum_login_failure_shows_an_alert(forum: httpx.Client) -> None:
    reply = forum.post("/login", data={"username": "quietfox", "password": "nope"})
    assert reply.status_code == 401 and 'role="alert"' in reply.text
    assert forum.get("/submit", follow_redirects=False).status_code == 303


# ------------------------------------------------------------------------------------ sessions and data


def test_tokens_see_independent_databases(sites: SiteServer) -> None:
    a, b = uuid.uuid4().hex, uuid.uuid4().hex
    sites.databases.open(a)
    sites.databases.open(b)
    try:
        with client(sites, "shopping", a) as shop_a, client(sites, "shopping", b) as shop_b:
            shop_login(shop_a)
            shop_login(shop_b)
            shop_a.post("/cart/add", data={"product_id": "3"})
            assert "My Cart (1 item)" in shop_a.get("/cart").text
            assert "You have no items in your shopping cart." in shop_b.get("/cart").text
        with client(sites, "reddit", a) as forum_a, client(sites, "reddit", b) as forum_b:
            forum_login(forum_a)
            forum_a.post("/submit", data={"forum": "books", "title": "Only in session A", "body": ""})
            assert "Only in session A" in forum_a.get("/f/books?sort=new").text
            assert "Only in session A" not in forum_b.get("/f/books?sort=new").text
    finally:
        sites.databases.drop(a)
        sites.databases.drop(b)


def test_reset_restores_the_pristine_state(sites: SiteServer, token: str) -> None:
    with client(sites, "reddit", token) as forum:
        forum_login(forum)
        forum.post("/submit", data={"forum": "books", "title": "Gone after reset", "body": ""})
        assert "Gone after reset" in forum.get("/f/books?sort=new").text
        sites.databases.reset(token)
        assert "Gone after reset" not in forum.get("/f/books?sort=new").text
        # The reset also signed everyone out.
        assert forum.get("/submit", follow_redirects=False).status_code == 303
    assert _contents(sites.databases.path(token)) == _contents(sites.databases.pristine)  # type: ignore[arg-type]


def test_unknown_session_is_refused_and_no_header_uses_default(sites: SiteServer) -> None:
    with client(sites, "shopping", "never-opened") as shop:
        reply = shop.get("/")
        assert reply.status_code == 404 and h1(reply.text) == "Unknown session"
    with client(sites, "reddit", None) as forum:
        assert forum.get("/").status_code == 200
    assert Databases.DEFAULT in sites.databases


def _contents(path: object) -> dict[str, list[tuple[object, ...]]]:
    db = sqlite3.connect(str(path))
    try:
        return {table: db.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall() for table in TABLES}
    finally:
        db.close()


def test_pristine_build_is_deterministic(tmp_path: object) -> None:
    first, second = tmp_path / "a.sqlite", tmp_path / "b.sqlite"  # type: ignore[operator]
    build_pristine(first)
    build_pristine(second)
    a, b = _contents(first), _contents(second)
    assert a == b
    assert first.read_bytes() == second.read_bytes()
    counts = {table: len(rows) for table, rows in a.items()}
    assert counts["shop_categories"] == 6 and counts["shop_products"] == 48
    assert counts["forum_posts"] == 60 and counts["forum_comments"] == 150
    assert counts["sessions"] == 0 and counts["shop_cart_items"] == 0
    names = [row[2] for row in a["shop_products"]]
    assert len(set(names)) == len(names)
    titles = [row[3] for row in a["forum_posts"]]
    assert len(set(titles)) == len(titles)


def test_each_session_gets_a_pristine_copy_of_its_own(tmp_path: object) -> None:
    # how fast a copy is made is bench/speed/webarena.py's figure (session_db_copy_ms, its budget line)
    dbs = Databases(tmp_path)  # type: ignore[arg-type]
    paths = [dbs.open(f"t{i}") for i in range(20)]
    pristine = dbs.pristine.read_bytes()
    assert len(set(paths)) == 20 and all(p.read_bytes() == pristine for p in paths)
    assert len(pristine) < 1_000_000  # small enough to copy per session
    db = dbs.connect("t0")
    db.execute("UPDATE shop_products SET stock = stock + 1")
    db.commit()
    db.close()
    assert paths[0].read_bytes() != pristine and paths[1].read_bytes() == pristine
    assert dbs.open("t0") == paths[0] and paths[0].read_bytes() == pristine  # a reset copies again
    dbs.close()


# ------------------------------------------------------------------------------ templates and safety


@pytest.mark.parametrize("site", [ShopContext, ForumContext])
def test_every_template_compiles_from_the_package_files(site: type[ShopContext | ForumContext]) -> None:
    env = site.templates
    names = env.list_templates(extensions=["html"])
    assert "layout.html" in names and "error.html" in names and "common/base.html" in names
    for name in names:
        env.get_template(name)
    css = env.globals["stylesheet"]
    assert "body{" in css and "<" not in css


def test_pages_inline_the_site_stylesheet(shop: httpx.Client, forum: httpx.Client) -> None:
    for client_, name in [(shop, "shop"), (forum, "forum")]:
        page = client_.get("/").text
        css = (resources.files("agentgym_webarena.sites") / "static" / f"{name}.css").read_text()
        assert f"<style>\n{css}</style>" in page


def test_a_form_posted_from_another_site_is_refused(
    sites: SiteServer, shop: httpx.Client, forum: httpx.Client
) -> None:
    evil = {"Origin": "http://evil.example"}
    reply = shop.post("/login", data={"email": EMMA["email"], "password": EMMA["password"]}, headers=evil)
    assert reply.status_code == 403 and h1(reply.text) == "Request refused"
    assert "shop_session" not in shop.cookies
    # The other bundled site is another origin too (another port).
    other = {"Origin": sites.urls["reddit"]}
    assert shop.post("/cart/add", data={"product_id": "1"}, headers=other).status_code == 403
    assert "My Cart (0 items)" in shop.get("/cart").text
    assert forum.post("/login", data=FOX, headers={"Origin": "null"}).status_code == 403
    # Its own pages' forms name this site's origin and pass.
    own = {"Origin": sites.urls["shopping"]}
    reply = shop.post("/login", data={"email": EMMA["email"], "password": EMMA["password"]}, headers=own)
    assert reply.status_code == 200 and h1(reply.text) == "My Account"


def test_hostile_forum_posts_and_bios_are_escaped(forum: httpx.Client) -> None:
    forum_login(forum)
    attack = '<img src=x onerror="alert(1)">'
    created = forum.post(
        "/submit", data={"forum": "books", "title": f"T {attack}", "body": f"B {attack}"}
    ).text
    escaped = "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;"
    assert f"<h1>T {escaped}</h1>" in created and f"<p>B {escaped}</p>" in created
    assert attack not in created
    for path in ["/f/books?sort=new", "/search?q=onerror", "/user/quietfox"]:
        page = forum.get(path).text
        assert escaped in page and attack not in page, path
    forum.post("/user/quietfox/edit_biography", data={"bio": attack})
    page = forum.get("/user/quietfox").text
    assert f"<p>{escaped}</p>" in page and attack not in page
