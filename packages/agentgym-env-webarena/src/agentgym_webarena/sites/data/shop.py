"""The shop's generated content (``shop_data()``): categories, products, reviews, customers and
their past orders, drawn from ``shop_words`` by one seeded generator; and ``SHOP_ACCOUNTS``, the
customers' login credentials for task writers.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from datetime import datetime
from functools import cache

from .clock import iso, random_moment
from .shop_words import (
    BOOK_ADJECTIVES,
    BOOK_AUTHORS,
    BOOK_CLOSINGS,
    CATEGORIES,
    CLOSINGS,
    CUSTOMERS,
    MODELS,
    REVIEW_SENTENCES,
    REVIEW_TITLES,
    REVIEWERS,
)

SHOP_NAME = "One Stop Market"
SHIPPING_CENTS = 500  # flat rate per order

# The shop's own seed: editing the forum's lists never changes the shop's data.
_SHOP_SEED = 20230615


def slugify(text: str) -> str:
    """Lower-case, ASCII-ish URL slug: runs of anything but letters and digits become one hyphen."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


@dataclass(frozen=True)
class Category:
    id: int
    slug: str
    name: str
    description: str


@dataclass(frozen=True)
class Product:
    id: int
    category_id: int
    name: str
    slug: str
    sku: str
    price_cents: int
    description: str
    stock: int


@dataclass(frozen=True)
class Review:
    id: int
    product_id: int
    author: str
    rating: int
    title: str
    body: str
    created: str  # "YYYY-MM-DD HH:MM:SS"


@dataclass(frozen=True)
class Customer:
    id: int
    name: str
    email: str
    password: str
    street: str
    city: str
    state: str
    zip: str
    country: str
    phone: str


@dataclass(frozen=True)
class OrderItem:
    product_id: int
    name: str
    sku: str
    price_cents: int
    qty: int


@dataclass(frozen=True)
class Order:
    id: int
    number: str
    customer_id: int
    created: str
    status: str
    items: tuple[OrderItem, ...]
    subtotal_cents: int
    shipping_cents: int
    total_cents: int


@dataclass(frozen=True)
class ShopData:
    categories: tuple[Category, ...]
    products: tuple[Product, ...]
    reviews: tuple[Review, ...]
    customers: tuple[Customer, ...]
    orders: tuple[Order, ...]


def _customer_email(name: str) -> str:
    first, last = name.lower().split(" ", 1)
    return f"{first}.{re.sub(r'[^a-z]', '', last)}@example.com"


def _customer_password(name: str) -> str:
    return f"{name.split()[0].lower()}Pass123!"


def _price_cents(rng: random.Random, low: int, high: int) -> int:
    return rng.randint(low, high) * 100 + rng.choice([99, 99, 49, 95, 0])


def _shop_catalogue(rng: random.Random) -> tuple[list[Category], list[Product]]:
    categories: list[Category] = []
    products: list[Product] = []
    for cat_index, (slug, name, description, prefix, brands, items) in enumerate(CATEGORIES, start=1):
        categories.append(Category(cat_index, slug, name, description))
        adjectives = rng.sample(BOOK_ADJECTIVES, len(items))
        for item_index, (item, low, high, feature) in enumerate(items):
            if brands:
                product_name = f"{rng.choice(brands)} {item} {rng.choice(MODELS)}"
                text = f"The {product_name} {feature}. " + " ".join(rng.sample(CLOSINGS, 2))
            else:
                product_name = f"The {adjectives[item_index]} {item} (Paperback)"
                author = rng.choice(BOOK_AUTHORS)
                text = f"By {author}: {feature}. {rng.choice(BOOK_CLOSINGS)}"
            stock = 0 if rng.random() < 0.06 else rng.randint(3, 80)
            products.append(
                Product(
                    id=len(products) + 1,
                    category_id=cat_index,
                    name=product_name,
                    slug=slugify(product_name),
                    sku=f"{prefix}-{1001 + item_index}",
                    price_cents=_price_cents(rng, low, high),
                    description=text,
                    stock=stock,
                )
            )
    return categories, products


def _shop_reviews(rng: random.Random, products: list[Product]) -> list[Review]:
    reviews: list[Review] = []
    review_start, review_end = datetime(2021, 6, 1), datetime(2023, 6, 1)
    for product in products:
        drafts = []
        for author in rng.sample(REVIEWERS, rng.randint(0, 5)):
            rating = rng.choices([1, 2, 3, 4, 5], weights=[7, 8, 15, 30, 40])[0]
            title = rng.choice(REVIEW_TITLES[rating])
            body = " ".join(rng.sample(REVIEW_SENTENCES[rating], 2))
            moment = random_moment(rng, review_start, review_end)
            drafts.append((moment, author, rating, title, body))
        for moment, author, rating, title, body in sorted(drafts):
            reviews.append(Review(len(reviews) + 1, product.id, author, rating, title, body, iso(moment)))
    return reviews


def _shop_customers() -> list[Customer]:
    return [
        Customer(
            id=index,
            name=name,
            email=_customer_email(name),
            password=_customer_password(name),
            street=street,
            city=city,
            state=state,
            zip=zip_code,
            country="United States",
            phone=phone,
        )
        for index, (name, street, city, state, zip_code, phone) in enumerate(CUSTOMERS, start=1)
    ]


def _shop_orders(rng: random.Random, customers: list[Customer], products: list[Product]) -> list[Order]:
    # Orders are drawn per customer, then numbered in date order across all customers, like a real store.
    drafts_orders = []
    recent = datetime(2023, 5, 1)
    for customer in customers:
        count = rng.randint(3, 6)
        for index in range(count):
            # Most customers' latest order is recent and still open; older ones are settled.
            if index == count - 1 and rng.random() < 0.7:
                moment = random_moment(rng, recent, datetime(2023, 6, 12))
                status = rng.choice(["Pending", "Processing"])
            else:
                moment = random_moment(rng, datetime(2022, 1, 3), recent)
                status = rng.choices(["Complete", "Canceled"], weights=[80, 20])[0]
            lines = []
            for product in rng.sample(products, rng.randint(1, 3)):
                lines.append(
                    OrderItem(product.id, product.name, product.sku, product.price_cents, rng.randint(1, 3))
                )
            drafts_orders.append((moment, customer.id, status, tuple(lines)))
    orders = []
    for index, (moment, customer_id, status, lines) in enumerate(sorted(drafts_orders), start=1):
        subtotal = sum(line.price_cents * line.qty for line in lines)
        orders.append(
            Order(
                id=index,
                number=f"{100 + index:09d}",
                customer_id=customer_id,
                created=iso(moment),
                status=status,
                items=lines,
                subtotal_cents=subtotal,
                shipping_cents=SHIPPING_CENTS,
                total_cents=subtotal + SHIPPING_CENTS,
            )
        )
    return orders


@cache
def shop_data() -> ShopData:
    """The shop's whole generated catalogue, reviews, customers and order history (same every call)."""
    # One generator drawn from in a fixed order (catalogue, reviews, orders): reordering changes the data.
    rng = random.Random(_SHOP_SEED)
    categories, products = _shop_catalogue(rng)
    reviews = _shop_reviews(rng, products)
    customers = _shop_customers()
    orders = _shop_orders(rng, customers, products)
    return ShopData(tuple(categories), tuple(products), tuple(reviews), tuple(customers), tuple(orders))


SHOP_ACCOUNTS: list[dict[str, str]] = [
    {"email": _customer_email(row[0]), "password": _customer_password(row[0]), "name": row[0]}
    for row in CUSTOMERS
]
