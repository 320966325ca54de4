"""The SQLite schema of both sites, and the tables that hold their content.

One database file holds both sites (tables prefixed ``shop_`` and ``forum_``, plus the login
``sessions`` of both), so one episode's whole world is one file: resetting it is one copy.
"""

SCHEMA = """
CREATE TABLE shop_categories (
    id INTEGER PRIMARY KEY,
    slug TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    description TEXT NOT NULL
);
CREATE TABLE shop_products (
    id INTEGER PRIMARY KEY,
    category_id INTEGER NOT NULL REFERENCES shop_categories(id),
    name TEXT NOT NULL UNIQUE,
    slug TEXT NOT NULL UNIQUE,
    sku TEXT NOT NULL UNIQUE,
    price_cents INTEGER NOT NULL,
    description TEXT NOT NULL,
    stock INTEGER NOT NULL
);
CREATE TABLE shop_customers (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE COLLATE NOCASE,
    password_hash TEXT NOT NULL,
    street TEXT NOT NULL,
    city TEXT NOT NULL,
    state TEXT NOT NULL,
    zip TEXT NOT NULL,
    country TEXT NOT NULL,
    phone TEXT NOT NULL
);
CREATE TABLE shop_reviews (
    id INTEGER PRIMARY KEY,
    product_id INTEGER NOT NULL REFERENCES shop_products(id),
    customer_id INTEGER REFERENCES shop_customers(id),
    author TEXT NOT NULL,
    rating INTEGER NOT NULL CHECK (rating BETWEEN 1 AND 5),
    title TEXT NOT NULL,
    body TEXT NOT NULL,
    created TEXT NOT NULL
);
CREATE TABLE shop_orders (
    id INTEGER PRIMARY KEY,
    number TEXT NOT NULL UNIQUE,
    customer_id INTEGER NOT NULL REFERENCES shop_customers(id),
    created TEXT NOT NULL,
    status TEXT NOT NULL,
    ship_name TEXT NOT NULL,
    ship_street TEXT NOT NULL,
    ship_city TEXT NOT NULL,
    ship_state TEXT NOT NULL,
    ship_zip TEXT NOT NULL,
    ship_country TEXT NOT NULL,
    ship_phone TEXT NOT NULL,
    subtotal_cents INTEGER NOT NULL,
    shipping_cents INTEGER NOT NULL,
    total_cents INTEGER NOT NULL
);
CREATE TABLE shop_order_items (
    id INTEGER PRIMARY KEY,
    order_id INTEGER NOT NULL REFERENCES shop_orders(id) ON DELETE CASCADE,
    product_id INTEGER REFERENCES shop_products(id),
    name TEXT NOT NULL,
    sku TEXT NOT NULL,
    price_cents INTEGER NOT NULL,
    qty INTEGER NOT NULL
);
-- cart is 'customer:<id>' for a signed-in customer, 'guest:<cookie token>' otherwise
CREATE TABLE shop_cart_items (
    cart TEXT NOT NULL,
    product_id INTEGER NOT NULL REFERENCES shop_products(id),
    qty INTEGER NOT NULL CHECK (qty > 0),
    PRIMARY KEY (cart, product_id)
);
CREATE TABLE shop_wishlist (
    customer_id INTEGER NOT NULL REFERENCES shop_customers(id),
    product_id INTEGER NOT NULL REFERENCES shop_products(id),
    added TEXT NOT NULL,
    PRIMARY KEY (customer_id, product_id)
);
CREATE TABLE forum_forums (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE COLLATE NOCASE,
    title TEXT NOT NULL,
    description TEXT NOT NULL,
    created TEXT NOT NULL
);
CREATE TABLE forum_users (
    id INTEGER PRIMARY KEY,
    username TEXT NOT NULL UNIQUE COLLATE NOCASE,
    password_hash TEXT NOT NULL,
    bio TEXT NOT NULL,
    created TEXT NOT NULL
);
CREATE TABLE forum_posts (
    id INTEGER PRIMARY KEY,
    forum_id INTEGER NOT NULL REFERENCES forum_forums(id),
    user_id INTEGER NOT NULL REFERENCES forum_users(id),
    title TEXT NOT NULL,
    body TEXT NOT NULL,
    created TEXT NOT NULL,
    edited TEXT,
    score INTEGER NOT NULL DEFAULT 0  -- sum of forum_post_votes.value, kept in step by the app
);
CREATE TABLE forum_comments (
    id INTEGER PRIMARY KEY,
    post_id INTEGER NOT NULL REFERENCES forum_posts(id) ON DELETE CASCADE,
    parent_id INTEGER REFERENCES forum_comments(id) ON DELETE CASCADE,
    user_id INTEGER NOT NULL REFERENCES forum_users(id),
    body TEXT NOT NULL,
    created TEXT NOT NULL,
    score INTEGER NOT NULL DEFAULT 0  -- sum of forum_comment_votes.value
);
CREATE TABLE forum_post_votes (
    user_id INTEGER NOT NULL REFERENCES forum_users(id),
    post_id INTEGER NOT NULL REFERENCES forum_posts(id) ON DELETE CASCADE,
    value INTEGER NOT NULL CHECK (value IN (-1, 1)),
    PRIMARY KEY (user_id, post_id)
);
CREATE TABLE forum_comment_votes (
    user_id INTEGER NOT NULL REFERENCES forum_users(id),
    comment_id INTEGER NOT NULL REFERENCES forum_comments(id) ON DELETE CASCADE,
    value INTEGER NOT NULL CHECK (value IN (-1, 1)),
    PRIMARY KEY (user_id, comment_id)
);
CREATE TABLE forum_subscriptions (
    user_id INTEGER NOT NULL REFERENCES forum_users(id),
    forum_id INTEGER NOT NULL REFERENCES forum_forums(id),
    PRIMARY KEY (user_id, forum_id)
);
-- login sessions of both sites; site is 'shop' (user_id: shop_customers.id) or 'forum' (forum_users.id)
CREATE TABLE sessions (
    token TEXT PRIMARY KEY,
    site TEXT NOT NULL,
    user_id INTEGER NOT NULL
);
CREATE INDEX shop_products_category ON shop_products(category_id);
CREATE INDEX shop_reviews_product ON shop_reviews(product_id);
CREATE INDEX shop_orders_customer ON shop_orders(customer_id);
CREATE INDEX shop_order_items_order ON shop_order_items(order_id);
CREATE INDEX forum_posts_forum ON forum_posts(forum_id);
CREATE INDEX forum_posts_user ON forum_posts(user_id);
CREATE INDEX forum_comments_post ON forum_comments(post_id);
CREATE INDEX forum_comments_user ON forum_comments(user_id);
"""

# Tables whose rows make up the sites' content, in creation order (what a determinism check compares).
TABLES = (
    "shop_categories",
    "shop_products",
    "shop_customers",
    "shop_reviews",
    "shop_orders",
    "shop_order_items",
    "shop_cart_items",
    "shop_wishlist",
    "forum_forums",
    "forum_users",
    "forum_posts",
    "forum_comments",
    "forum_post_votes",
    "forum_comment_votes",
    "forum_subscriptions",
    "sessions",
)
