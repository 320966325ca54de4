"""Generated content of the two embedded sites: a shop ("One Stop Market") and a forum ("Postmill").

Everything comes from the word lists below and two seeded ``random.Random`` instances (one per site, so
that editing the forum's lists never changes the shop's data), with no network and no files read. The
content is generated once per process (``shop_data()``, ``forum_data()``) and is identical on every run
and every machine, so tasks can name products, prices, orders and posts.

The sites live in a frozen present: ``SITE_NOW`` is "now" for both (orders placed and posts written
during an episode are stamped from it, not from the wall clock), which keeps pages reproducible.

Exported for task writers: ``SHOP_ACCOUNTS`` and ``FORUM_ACCOUNTS`` (login credentials), ``SHOP_NAME``,
``FORUM_NAME``, ``SITE_NOW`` and the two data functions.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache

SHOP_NAME = "One Stop Market"
FORUM_NAME = "Postmill"
SITE_NOW = datetime(2023, 6, 15, 12, 0, 0)
SHIPPING_CENTS = 500  # flat rate per order

_SHOP_SEED = 20230615
_FORUM_SEED = 61520230


def slugify(text: str) -> str:
    """Lower-case, ASCII-ish URL slug: runs of anything but letters and digits become one hyphen."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S")


# --------------------------------------------------------------------------------------------- shop


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


# (slug, name, description, SKU prefix, brands, [(item, lowest dollars, highest dollars, feature)])
_CATEGORIES: list[tuple[str, str, str, str, list[str], list[tuple[str, int, int, str]]]] = [
    (
        "electronics",
        "Electronics",
        "Headphones, speakers, wearables and the gadgets that keep them charged.",
        "ELE",
        ["Voltix", "Sonara", "Kestrel", "Lumina", "Arcwave"],
        [
            ("Wireless Earbuds", 29, 149, "delivers up to 8 hours of playback from a single charge"),
            ("Bluetooth Speaker", 19, 129, "fills a room with clear sound and survives a splash"),
            ("Smart Watch", 79, 299, "tracks steps, sleep and heart rate and shows your notifications"),
            ("Noise Cancelling Headphones", 89, 349, "blocks engine hum and office chatter alike"),
            ("Portable Power Bank", 15, 69, "stores 20,000 mAh and charges two devices at once"),
            ("Action Camera", 99, 399, "records stabilized 4K video and is waterproof to 10 meters"),
            ("Mechanical Keyboard", 49, 179, "uses tactile switches and has a detachable USB-C cable"),
            ("Wireless Mouse", 12, 79, "tracks on almost any surface and runs for months on one battery"),
        ],
    ),
    (
        "home-kitchen",
        "Home & Kitchen",
        "Cookware, tableware and everyday comforts for the home.",
        "HOM",
        ["HearthCo", "Maple & Vine", "Nordhaus", "Casa Bella"],
        [
            ("Stainless Steel Saucepan", 24, 89, "heats evenly on gas, electric and induction hobs"),
            ("Ceramic Coffee Mug Set", 14, 49, "comes as four dishwasher-safe mugs in matte glaze"),
            ("Bamboo Cutting Board", 9, 39, "is gentle on knives and has a juice groove"),
            ("Cast Iron Skillet", 19, 79, "arrives pre-seasoned and goes from stovetop to oven"),
            ("Electric Kettle", 19, 99, "boils a full liter in under four minutes"),
            ("Cotton Bath Towel Set", 24, 89, "includes six soft, absorbent towels"),
            ("Glass Food Storage Containers", 19, 59, "keeps leftovers fresh with snap-lock lids"),
            ("Pour-Over Coffee Maker", 14, 59, "brews a clean, bright cup in a few minutes"),
        ],
    ),
    (
        "books",
        "Books",
        "Novels, memoirs and the occasional field guide.",
        "BOO",
        [],
        [
            ("Orchard", 9, 29, "a family saga set among apple trees"),
            ("Lighthouse", 9, 29, "a mystery on a storm-bound island"),
            ("Cartographer", 9, 29, "an adventure across unmapped mountains"),
            ("Harbor", 9, 29, "a love story in a fading fishing town"),
            ("Clockmaker", 9, 29, "a puzzle of gears, grief and a missing heir"),
            ("Atlas", 9, 29, "an epic fantasy about a stolen map of the world"),
            ("Garden", 9, 29, "a quiet memoir of growing things"),
            ("Observatory", 9, 29, "a science fiction tale of a signal from a dead star"),
        ],
    ),
    (
        "sports-outdoors",
        "Sports & Outdoors",
        "Gear for the gym, the trail and the campsite.",
        "SPO",
        ["Summit Trail", "PeakForm", "Ridgeline", "TerraGo"],
        [
            ("Yoga Mat", 15, 79, "is 6 mm thick with a non-slip texture on both sides"),
            ("Insulated Water Bottle", 12, 45, "keeps drinks cold for 24 hours and hot for 12"),
            ("Camping Tent", 59, 299, "sleeps two and pitches in under five minutes"),
            ("Hiking Backpack", 39, 189, "has a 40-liter main compartment and a rain cover"),
            ("Adjustable Dumbbell Set", 49, 249, "adjusts from 5 to 25 pounds with a twist"),
            ("Trail Running Shoes", 59, 159, "grip wet rock and drain quickly after stream crossings"),
            ("Resistance Band Set", 9, 39, "includes five bands from extra light to extra heavy"),
            ("Folding Camp Chair", 19, 89, "folds flat and holds up to 300 pounds"),
        ],
    ),
    (
        "beauty",
        "Beauty",
        "Skincare, haircare and makeup.",
        "BEA",
        ["Lumiere", "Velvet Bloom", "PureLeaf", "Aurora Skin"],
        [
            ("Vitamin C Serum", 12, 59, "brightens dull skin with a lightweight formula"),
            ("Hydrating Face Moisturizer", 11, 49, "locks in moisture without feeling greasy"),
            ("Mineral Sunscreen SPF 50", 9, 35, "protects without leaving a white cast"),
            ("Argan Oil Shampoo", 8, 29, "leaves hair soft and smelling faintly of citrus"),
            ("Matte Lipstick", 7, 29, "lasts through coffee and lunch"),
            ("Clay Face Mask", 9, 39, "draws out impurities in ten minutes"),
            ("Lavender Body Lotion", 7, 25, "soothes dry skin with shea butter and lavender oil"),
            ("Eyeshadow Palette", 14, 59, "holds twelve blendable shades from nude to smoky"),
        ],
    ),
    (
        "toys",
        "Toys",
        "Games, puzzles and things to build for kids of all ages.",
        "TOY",
        ["Tiny Tinkers", "Playnest", "BrightBox", "Wonderkin"],
        [
            ("Wooden Building Blocks", 19, 59, "comes as 100 smooth, painted blocks in a storage tub"),
            ("Remote Control Car", 24, 119, "reaches 15 mph and climbs over rough ground"),
            ("Plush Teddy Bear", 12, 45, "is extra soft and safe from birth"),
            ("Jigsaw Puzzle", 12, 34, "has 1000 pieces that lock firmly together"),
            ("Magnetic Tile Set", 29, 99, "lets kids build towers, houses and rockets"),
            ("Dinosaur Figure Set", 14, 44, "includes twelve detailed dinosaurs"),
            ("Kids Art Easel", 39, 129, "has a chalkboard side, a whiteboard side and a paper roll"),
            ("Family Board Game", 14, 49, "plays in 30 minutes for two to six players"),
        ],
    ),
]

_MODELS = ["X2", "Pro", "Lite", "Max", "S3", "Air", "Plus", "Go", "Mini", "Neo"]
_BOOK_ADJECTIVES = ["Silent", "Hidden", "Last", "Crimson", "Forgotten", "Midnight", "Golden", "Winter"]
_BOOK_CLOSINGS = [
    "A book club favorite.",
    "Now in paperback for the first time.",
    "Winner of the Lantern Prize for debut fiction.",
    "Includes a reading group guide.",
]
_BOOK_AUTHORS = ["Clara Whitmore", "Idris Okafor", "Mei Takahashi", "Tomas Lindqvist", "Ava Delgado"]
_CLOSINGS = [
    "Backed by a one-year warranty.",
    "Ships in recyclable packaging.",
    "A customer favorite since it launched.",
    "Makes a thoughtful gift.",
    "Designed to last for years of daily use.",
    "Easy to clean and easy to store.",
]

_REVIEWERS = [
    "Alex Kim", "Maria Garcia", "John Smith", "Aisha Bello", "Chen Wei", "Olivia Brown", "Noah Wilson",
    "Fatima Khan", "Lucas Martin", "Grace Lee", "Daniel Novak", "Hannah Schmidt", "Mateo Silva",
    "Yuki Sato", "Ethan Clark", "Zoe Adams", "Omar Haddad", "Isabel Costa", "Ryan Murphy", "Nina Petrova",
]  # fmt: skip

_REVIEW_TITLES = {
    5: ["Absolutely love it", "Exceeded my expectations", "Five stars, no question", "Best purchase this year",
        "Highly recommend", "Perfect gift"],
    4: ["Very good", "Solid choice", "Happy with it", "Great value for the price", "Almost perfect"],
    3: ["It's okay", "Decent but not perfect", "Average", "Does the job"],
    2: ["Disappointing", "Not as described", "Expected more"],
    1: ["Broke after a week", "Would not buy again", "Waste of money"],
}  # fmt: skip

_REVIEW_SENTENCES = {
    5: ["It works exactly as advertised.", "The quality is outstanding.", "I bought a second one for my sister.",
        "Shipping was fast and it arrived well packed.", "I use it every single day."],
    4: ["Good quality overall.", "It does what it should, with one small quirk.",
        "A little pricey, but worth it.", "The color is slightly different from the photos."],
    3: ["It is fine for the price.", "Some parts feel cheap.", "It works, but I expected a bit more.",
        "The instructions could be clearer."],
    2: ["It stopped working properly after a month.", "The size was smaller than I thought.",
        "Customer service was slow to answer."],
    1: ["It arrived damaged.", "It did not work at all out of the box.", "I returned it the next day."],
}  # fmt: skip

_CUSTOMERS = [
    ("Emma Lopez", "742 Maple Street", "Springfield", "IL", "62704", "217-555-0142"),
    ("James Carter", "18 Harbor View Road", "Portland", "ME", "04101", "207-555-0187"),
    ("Priya Natarajan", "3300 Sunset Boulevard Apt 12", "Los Angeles", "CA", "90026", "323-555-0110"),
    ("Liam O'Connor", "56 Beacon Street", "Boston", "MA", "02108", "617-555-0163"),
    ("Sofia Rossi", "901 Lakeshore Drive", "Chicago", "IL", "60611", "312-555-0129"),
]


def _customer_email(name: str) -> str:
    first, last = name.lower().split(" ", 1)
    return f"{first}.{re.sub(r'[^a-z]', '', last)}@example.com"


def _customer_password(name: str) -> str:
    return f"{name.split()[0].lower()}Pass123!"


def _price_cents(rng: random.Random, low: int, high: int) -> int:
    return rng.randint(low, high) * 100 + rng.choice([99, 99, 49, 95, 0])


def _random_moment(rng: random.Random, start: datetime, end: datetime) -> datetime:
    seconds = int((end - start).total_seconds())
    return start + timedelta(seconds=rng.randrange(seconds) // 60 * 60)


def _shop_catalogue(rng: random.Random) -> tuple[list[Category], list[Product]]:
    categories: list[Category] = []
    products: list[Product] = []
    for cat_index, (slug, name, description, prefix, brands, items) in enumerate(_CATEGORIES, start=1):
        categories.append(Category(cat_index, slug, name, description))
        adjectives = rng.sample(_BOOK_ADJECTIVES, len(items))
        for item_index, (item, low, high, feature) in enumerate(items):
            if brands:
                product_name = f"{rng.choice(brands)} {item} {rng.choice(_MODELS)}"
                text = f"The {product_name} {feature}. " + " ".join(rng.sample(_CLOSINGS, 2))
            else:
                product_name = f"The {adjectives[item_index]} {item} (Paperback)"
                author = rng.choice(_BOOK_AUTHORS)
                text = f"By {author}: {feature}. {rng.choice(_BOOK_CLOSINGS)}"
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
        for author in rng.sample(_REVIEWERS, rng.randint(0, 5)):
            rating = rng.choices([1, 2, 3, 4, 5], weights=[7, 8, 15, 30, 40])[0]
            title = rng.choice(_REVIEW_TITLES[rating])
            body = " ".join(rng.sample(_REVIEW_SENTENCES[rating], 2))
            moment = _random_moment(rng, review_start, review_end)
            drafts.append((moment, author, rating, title, body))
        for moment, author, rating, title, body in sorted(drafts):
            reviews.append(Review(len(reviews) + 1, product.id, author, rating, title, body, _iso(moment)))
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
        for index, (name, street, city, state, zip_code, phone) in enumerate(_CUSTOMERS, start=1)
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
                moment = _random_moment(rng, recent, datetime(2023, 6, 12))
                status = rng.choice(["Pending", "Processing"])
            else:
                moment = _random_moment(rng, datetime(2022, 1, 3), recent)
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
                created=_iso(moment),
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
    for row in _CUSTOMERS
]


# -------------------------------------------------------------------------------------------- forum


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


_FORUMS = [
    ("books", "Books", "Discuss novels, nonfiction and everything in between."),
    ("gaming", "Gaming", "Video games, board games and the people who play them."),
    ("science", "Science", "Research news, questions and backyard experiments."),
    ("movies", "Movies", "Reviews, trailers and arguments about endings."),
    ("cooking", "Cooking", "Recipes, techniques and kitchen disasters."),
    ("travel", "Travel", "Trip reports, itineraries and packing advice."),
]

_USERS = [
    ("quietfox", "Reads too much, sleeps too little. Mostly lurking in f/books."),
    ("marcopolo88", "Been to 34 countries, still can't pack light."),
    ("leafy_greens", "Home cook. Vegetables are the main course."),
    ("starlight_sam", "Amateur astronomer with a 6-inch reflector and a lot of patience."),
    ("bytebandit", "Speedrunner, modder, occasional game designer."),
    ("nora_reads", "Librarian by day, mystery novelist by night."),
    ("trailmix", "Hiker and camper. Will trade snacks for trail reports."),
    ("chefjules", "Line cook for ten years, now teaching weekend classes."),
    ("orbitalcat", "Physics grad student. Opinions are my cat's."),
    ("pixelpete", "Retro games and CRT monitors forever."),
    ("wanderwren", "Slow travel, trains over planes."),
    ("reel_rachel", "Watches three films a week and writes about all of them."),
]

_SLOTS: dict[str, list[str]] = {
    "book": ["The Glass Orchard", "A River of Salt", "Nine Winters", "The Paper Lantern", "Ember and Ash",
             "The Quiet Cartographer", "Letters from Lisbon", "The Lighthouse Keeper's Son"],
    "author": ["Clara Whitmore", "Idris Okafor", "Mei Takahashi", "Tomas Lindqvist", "Ava Delgado"],
    "genre": ["fantasy", "mystery", "science fiction", "historical fiction", "horror", "romance"],
    "month": ["January", "February", "March", "April", "May", "June"],
    "game": ["Starforge Tactics", "Hollow Lantern", "Neon Drift", "Kingdoms of Ash", "Tidebreaker",
             "Pixel Harvest", "Moonlit Racers"],
    "version": ["1.4", "2.0", "2.1", "3.2"],
    "players": ["two", "three", "four"],
    "finding": ["octopuses dream", "bees can count to four", "a new exoplanet has water vapor",
                "sleep clears waste from the brain", "coral can recover from bleaching"],
    "phenomenon": ["the sky look blue", "ice float", "the moon look bigger near the horizon",
                   "soap remove grease", "a microwave heat food"],
    "sky_object": ["Jupiter and its moons", "the Orion Nebula", "Saturn's rings", "the Andromeda Galaxy"],
    "topic": ["entropy", "black holes", "photosynthesis", "plate tectonics", "vaccines"],
    "film": ["The Last Signal", "Paper Moon Rising", "Dust and Diamonds", "Northbound", "The Glass Key",
             "Midnight at the Lido"],
    "director": ["Elena Marsh", "Kofi Mensah", "Hiro Tanaka", "Sofia Varga"],
    "dish": ["sourdough bread", "ramen broth", "lasagna", "pad thai", "shakshuka", "banana bread",
             "chicken curry", "risotto"],
    "ingredient": ["miso", "smoked paprika", "brown butter", "fish sauce", "tahini", "sumac"],
    "place": ["Lisbon", "Kyoto", "Patagonia", "Iceland", "Vietnam", "the Scottish Highlands", "Morocco",
              "New Zealand"],
    "days": ["three", "five", "seven", "ten", "fourteen"],
}  # fmt: skip

_TITLE_TEMPLATES: dict[str, list[str]] = {
    "books": ["Just finished {book} and I can't stop thinking about it", "What are you reading this {month}?",
              "Underrated {genre} novels you'd recommend?", "Is {book} worth it after the first hundred pages?",
              "{author} announced a new book", "Book club pick for {month}: {book}",
              "Looking for {genre} like {book}"],
    "gaming": ["Anyone else still playing {game}?", "{game} patch {version} broke my favorite build",
               "Best co-op games for {players} players?", "Finally beat {game} on hard mode",
               "Hidden gem: {game}", "Is {game} worth full price?"],
    "science": ["New study suggests {finding}", "ELI5: why does {phenomenon}?",
                "Photo of {sky_object} from my backyard telescope", "Question about {topic} from a student",
                "Good books to understand {topic}?"],
    "movies": ["Just watched {film} and the ending wrecked me", "{director} is directing a sequel to {film}",
               "Is {film} overrated?", "Movies like {film}?", "{film} rewatch thread"],
    "cooking": ["My first attempt at {dish}", "How do you keep {dish} from going soggy?",
                "Adding {ingredient} to {dish} changed everything", "Weeknight {dish} recipe that never fails",
                "What can I do with leftover {ingredient}?"],
    "travel": ["Trip report: {days} days in {place}", "Is {place} worth visiting in winter?",
               "Itinerary help for {place}", "Packing list for {days} days in {place}",
               "Best food I ate in {place}"],
}  # fmt: skip

_BODY_SENTENCES: dict[str, list[str]] = {
    "books": ["The prose is gorgeous but the pacing drags in the middle.", "I read it in two sittings.",
              "The ending split our book club down the middle.", "I keep recommending it to everyone I know.",
              "The audiobook narrator is fantastic.", "I would love recommendations with a similar mood."],
    "gaming": ["The combat finally clicked for me after ten hours.", "My co-op group is looking for something new.",
               "The soundtrack alone is worth it.", "The last update changed the balance a lot.",
               "I play mostly on weekends, so shorter sessions matter.", "It went on sale for half price."],
    "science": ["The paper is open access if anyone wants to read it.", "I'm a high school teacher and my "
                "students asked me this.", "The seeing was excellent last night.",
                "The sample size is small, so take it with a grain of salt.",
                "I tried explaining it and got stuck halfway.", "Would love a simple explanation."],
    "movies": ["The cinematography is stunning.", "I went in knowing nothing, which helped.",
               "The second act drags a little.", "The score stuck with me for days.",
               "My friends hated it and I can't understand why.", "Spoilers in the comments, please tag them."],
    "cooking": ["I followed the recipe exactly and it still came out dense.", "The trick is patience.",
                "My family asked for seconds.", "I used a cast iron pan for this.",
                "Next time I'll use less salt.", "Any tips are welcome."],
    "travel": ["We took the train for most of the trip.", "Booking a week ahead saved us a lot of money.",
               "The locals were incredibly welcoming.", "I packed far too many shoes.",
               "The weather changed every hour.", "Happy to answer questions."],
}  # fmt: skip

_COMMENT_SENTENCES = [
    "Great post, thanks for sharing!", "I had exactly the same experience.", "Strongly disagree, but I see your point.",
    "This is the best thing I've read all week.", "Can you share more details?", "Saving this for later.",
    "I tried this last year and loved it.", "Not for me, but I'm glad you enjoyed it.", "Came here to say this.",
    "Do you have a link to the source?", "This made my day.", "I think you're underrating it.",
    "Seconding this recommendation.", "Counterpoint: it's fine the way it is.", "Happened to me too, twice.",
    "Thanks, this answered my question.", "Hard agree.", "Following, I want to know the answer too.",
    "That's a really interesting way to look at it.", "Welcome to the forum!", "Ha, this is so true.",
    "Which edition did you get?", "How long did it take you?", "I'd add one more to that list.",
]  # fmt: skip


def _fill(template: str, rng: random.Random) -> str:
    return re.sub(r"\{(\w+)\}", lambda match: rng.choice(_SLOTS[match.group(1)]), template)


def _forum_posts(rng: random.Random, forums: tuple[Forum, ...], users: tuple[User, ...]) -> tuple[Post, ...]:
    titles: set[str] = set()
    drafts_posts = []
    post_start, post_end = datetime(2023, 1, 2), SITE_NOW - timedelta(hours=3)
    for forum in forums:
        while sum(1 for draft in drafts_posts if draft[1] == forum.id) < 10:
            title = _fill(rng.choice(_TITLE_TEMPLATES[forum.name]), rng)
            if title in titles:
                continue
            titles.add(title)
            body = " ".join(rng.sample(_BODY_SENTENCES[forum.name], rng.randint(2, 4)))
            moment = _random_moment(rng, post_start, post_end)
            drafts_posts.append((moment, forum.id, rng.choice(users).id, title, body))
    # Ids follow creation time, as they would on a live site.
    return tuple(
        Post(index, forum_id, user_id, title, body, _iso(moment))
        for index, (moment, forum_id, user_id, title, body) in enumerate(sorted(drafts_posts), start=1)
    )


def _forum_comments(rng: random.Random, posts: tuple[Post, ...], users: tuple[User, ...]) -> list[Comment]:
    drafts_comments: list[tuple[datetime, int, int, str, int | None]] = []
    for _ in range(150):
        post = rng.choice(posts)
        posted = datetime.fromisoformat(post.created)
        moment = min(posted + timedelta(minutes=rng.randint(5, 60 * 72)), SITE_NOW - timedelta(minutes=30))
        author = rng.choice([user.id for user in users if user.id != post.user_id])
        body = " ".join(rng.sample(_COMMENT_SENTENCES, rng.randint(1, 2)))
        drafts_comments.append((moment, post.id, author, body, None))
    drafts_comments.sort()
    comments: list[Comment] = []
    for moment, post_id, author, body, _ in drafts_comments:
        earlier = [comment for comment in comments if comment.post_id == post_id]
        # About a third of comments answer an earlier comment on the same post.
        parent = rng.choice(earlier).id if earlier and rng.random() < 0.35 else None
        comments.append(Comment(len(comments) + 1, post_id, parent, author, body, _iso(moment)))
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
        Forum(index, name, title, description, _iso(datetime(2022, 11, index)))
        for index, (name, title, description) in enumerate(_FORUMS, start=1)
    )
    users = tuple(
        User(index, username, _forum_password(username), bio, _iso(datetime(2022, 11, 10 + index, 9)))
        for index, (username, bio) in enumerate(_USERS, start=1)
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
    {"username": username, "password": _forum_password(username)} for username, _ in _USERS
]
