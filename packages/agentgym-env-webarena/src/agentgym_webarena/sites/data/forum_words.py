"""The forum's word lists: its forums and users, and the templates and sentences its posts and
comments are written from.

Only ``data.forum`` draws from them; reordering or editing an entry changes the generated forum.
"""

from __future__ import annotations

FORUMS = [
    ("books", "Books", "Discuss novels, nonfiction and everything in between."),
    ("gaming", "Gaming", "Video games, board games and the people who play them."),
    ("science", "Science", "Research news, questions and backyard experiments."),
    ("movies", "Movies", "Reviews, trailers and arguments about endings."),
    ("cooking", "Cooking", "Recipes, techniques and kitchen disasters."),
    ("travel", "Travel", "Trip reports, itineraries and packing advice."),
]

USERS = [
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

SLOTS: dict[str, list[str]] = {
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

TITLE_TEMPLATES: dict[str, list[str]] = {
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

BODY_SENTENCES: dict[str, list[str]] = {
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

COMMENT_SENTENCES = [
    "Great post, thanks for sharing!", "I had exactly the same experience.", "Strongly disagree, but I see your point.",
    "This is the best thing I've read all week.", "Can you share more details?", "Saving this for later.",
    "I tried this last year and loved it.", "Not for me, but I'm glad you enjoyed it.", "Came here to say this.",
    "Do you have a link to the source?", "This made my day.", "I think you're underrating it.",
    "Seconding this recommendation.", "Counterpoint: it's fine the way it is.", "Happened to me too, twice.",
    "Thanks, this answered my question.", "Hard agree.", "Following, I want to know the answer too.",
    "That's a really interesting way to look at it.", "Welcome to the forum!", "Ha, this is so true.",
    "Which edition did you get?", "How long did it take you?", "I'd add one more to that list.",
]  # fmt: skip
