"""Writes eval/prepare/samples/longbench_v2_mini/data.json: 6 LongBench-v2-format items written for lbeval.

NOT LongBench data. Each context is filler prose (or code, a table, a glossary) assembled from hand-written
sentence parts by a seeded `random.Random` (a local instance per item, no global seeding), with hand-written
key passages placed at chosen fractions of the text. The question of each item is answerable from its key
passages, with exactly one correct choice; `check_items` asserts that every key phrase occurs exactly once.

Contexts are about 3,600-4,900 words, so with a 4,096-token model window the official middle truncation
(first half + last half of the prompt's tokens) cuts out roughly the middle third or more: items 0002 and
0004 have their key facts there, the others at the start and/or the end.

Run `.venv/bin/python -m tests.eval.prepare.make_longbench_v2_mini` (from the project root) to rewrite the file;
test_longbench_v2_mini.py checks that the committed file is exactly what this writes. (A test tool, not packaged.)
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

OUT = Path(__file__).resolve().parents[3] / "eval" / "prepare" / "samples" / "longbench_v2_mini" / "data.json"
ID_PREFIX = "lbv2mini-"


@dataclass(frozen=True)
class Key:
    """A hand-written passage placed at `at` (0..1) of the filler blocks."""

    at: float
    text: str


def words(text: str) -> int:
    return len(text.split())


def assemble(
    rng: random.Random, filler: Callable[[random.Random], str], keys: Sequence[Key], target: int
) -> str:
    """Filler blocks until `target` words, with each key block inserted at its fraction of the blocks."""
    blocks: list[str] = []
    total = sum(words(key.text) for key in keys)
    while total < target:
        block = filler(rng)
        blocks.append(block)
        total += words(block)
    for key in sorted(keys, key=lambda k: k.at, reverse=True):
        blocks.insert(round(key.at * len(blocks)), key.text)
    return "\n\n".join(blocks)


def sentence_paragraph(
    rng: random.Random, openers: Sequence[str], subjects: Sequence[str], rest: Sequence[str]
) -> str:
    """4-7 sentences "<opener> <subject> <rest>."; the opener is left out one time in three."""
    sentences = []
    for _ in range(rng.randint(4, 7)):
        subject, predicate = rng.choice(subjects), rng.choice(rest)
        if rng.random() < 1 / 3:
            sentences.append(f"{subject[0].upper()}{subject[1:]} {predicate}.")
        else:
            sentences.append(f"{rng.choice(openers)} {subject} {predicate}.")
    return " ".join(sentences)


# 0001: a village chronicle; the answer is in the first few percent of the text.
CHRONICLE_OPENERS = (
    "In the years after the flood,", "By the turn of that century,", "Each autumn,", "During the long winters,",
    "In the spring of most years,", "According to the parish ledgers,", "Older residents recalled that",
    "For several generations,", "When the harvest was poor,", "On market days,", "In the evenings,",
    "Throughout the dry summers,", "Before the new road was built,", "As the village grew,",
)  # fmt: skip
CHRONICLE_SUBJECTS = (
    "the ferry hands", "the weavers of the lower street", "the chapel choir", "the orchard families",
    "the apprentices at the mill", "the river traders", "the schoolmaster and his pupils", "the cattle drovers from the hills",
    "the council of elders", "the salt merchants", "the fishermen on the estuary", "the smiths of Anvil Row",
    "the landlord of the crossroads inn", "the shepherds of the eastern downs", "the women who ran the dairy",
)  # fmt: skip
CHRONICLE_PREDICATES = (
    "kept careful records of every cargo that passed through", "gathered in the square to hear news from the coast",
    "argued for weeks about the price of grain", "repaired the sea wall with timber hauled from the forest",
    "sent their children to learn their letters from the curate", "traded wool for salt and candles",
    "held a feast that lasted until morning", "watched the tides with a wary eye",
    "complained that the roads were too muddy for carts", "built a new storehouse near the quay",
    "paid their dues in barley rather than coin", "sang the old songs of the valley",
    "sheltered travellers caught by the winter storms", "planted rows of alder along the embankment",
    "kept the peace through a long and difficult season", "quarrelled with the neighbouring parish over a boundary",
)  # fmt: skip
LIGHTHOUSE = (
    "Of all the buildings raised after the great flood, none mattered more to Marrow Ford than the lighthouse on "
    "Gull Point. Its lamp was lit for the first time in the spring after the waters fell, and its first keeper "
    "was Ilse Varden, who had mended nets on the quay before the flood. She tended the light for thirty-one "
    "years. The ferryman of those years, Tomas Rell, liked to say that he owed his life to her lamp on more "
    "than one foggy night."
)
FAMINE = (
    "The famine winter is remembered for two people above all. The village baker, Maud Osric, kept her ovens "
    "burning through the worst of the cold and fed half the valley, and the mayor, Edric Vane, opened the "
    "granary doors to anyone who asked, whether or not they could pay."
)


def chronicle(rng: random.Random) -> str:
    return sentence_paragraph(rng, CHRONICLE_OPENERS, CHRONICLE_SUBJECTS, CHRONICLE_PREDICATES)


# 0002: a small Python repository; the constants and the function asked about are in the middle.
CODE_VERBS = (
    "load",
    "parse",
    "group",
    "count",
    "format",
    "filter",
    "sort",
    "merge",
    "find",
    "check",
    "collect",
)
CODE_NOUNS = (
    "gates",
    "readings",
    "vehicles",
    "entries",
    "shifts",
    "routes",
    "alerts",
    "plates",
    "receipts",
    "lanes",
)
CODE_ATTRS = ("lane", "plate", "stamp", "gate_id", "kind", "operator", "region")
CODE_MODULES = (
    "routing", "ledger", "sensors", "reports", "calendar_utils", "vehicles", "gates", "audit", "notifications",
    "export", "plates", "shifts", "operators", "regions", "receipts", "lanes", "alerts", "archive",
)  # fmt: skip
CODE_BODIES = (
    "    total = 0\n    for item in {arg}:\n        total += item.{attr}\n    return total",
    "    if not {arg}:\n        return None\n    return {arg}[0]",
    "    return [item for item in {arg} if item.{attr} is not None]",
    "    return sorted({arg}, key=lambda item: item.{attr})",
    "    result = {{}}\n    for item in {arg}:\n        result.setdefault(item.{attr}, []).append(item)\n    return result",
    "    return max({arg}, key=lambda item: item.{attr}, default=None)",
    "    seen = set()\n    for item in {arg}:\n        seen.add(item.{attr})\n    return sorted(seen)",
    "    return {{item.{attr}: item for item in {arg}}}",
)  # fmt: skip
CONSTANTS = (
    "### File: tollgate/constants.py\n\n"
    '"""Fee constants shared by the billing code (all amounts in whole crowns)."""\n\n'
    'GRACE_DAYS = 2\nBASE_LATE_FEE = 4\nDAILY_LATE_FEE = 3\nCURRENCY = "crown"'
)
BILLING = (
    "### File: tollgate/billing.py\n\n"
    '"""Billing rules for tolls that are paid late."""\n\n'
    "from tollgate.constants import BASE_LATE_FEE, DAILY_LATE_FEE, GRACE_DAYS\n\n\n"
    "def late_fee(days_overdue):\n"
    '    """Late fee, in crowns, for a toll paid `days_overdue` days after it was due."""\n'
    "    if days_overdue <= GRACE_DAYS:\n        return 0\n"
    "    return BASE_LATE_FEE + (days_overdue - GRACE_DAYS) * DAILY_LATE_FEE"
)


CODE_AREAS = ("core", "io", "admin", "sync")


def code_file(rng: random.Random, path: str) -> str:
    """One module of 3-6 small functions over records (no fees, no numbers that matter)."""
    topic = path.rsplit("/", 1)[-1].replace("_", " ")
    parts = [f"### File: tollgate/{path}.py", f'"""Helpers for {topic}."""']
    names: set[str] = set()
    count = rng.randint(3, 6)
    while len(names) < count:
        verb, noun, attr = rng.choice(CODE_VERBS), rng.choice(CODE_NOUNS), rng.choice(CODE_ATTRS)
        if f"{verb}_{noun}_by_{attr}" in names:
            continue
        names.add(f"{verb}_{noun}_by_{attr}")
        body = rng.choice(CODE_BODIES).format(arg=noun, attr=attr)
        doc = f'    """{verb.capitalize()} the {noun} of a {topic} batch by {attr}."""'
        parts.append(f"def {verb}_{noun}_by_{attr}({noun}):\n{doc}\n{body}")
    return "\n\n\n".join(parts)


def code_files(rng: random.Random) -> Callable[[random.Random], str]:
    """A filler of code files, each under a path not used before."""
    paths = iter(
        rng.sample(
            [f"{a}/{m}" for a in CODE_AREAS for m in CODE_MODULES], len(CODE_AREAS) * len(CODE_MODULES)
        )
    )
    return lambda r: code_file(r, next(paths))


# 0003: a council meeting; the decision is near the end, two rejected proposals earlier.
SPEAKERS = ("MAYOR ODA", "COUNCILLOR BRENN", "COUNCILLOR FAYE", "COUNCILLOR HALE", "COUNCILLOR IMRIE")
TALK_OPENERS = (
    "I still think", "In my view,", "Let me remind everyone that", "With respect,", "As I said last month,",
    "Frankly,", "I agree that", "We should note that", "The residents tell me that", "To be fair,",
)  # fmt: skip
TALK_TOPICS = (
    "the well on Tanner Lane", "the school roof", "the toll on the north road", "the lamp posts by the harbour",
    "the grazing dispute on the common", "the drainage ditch behind the tannery", "the budget for the fire brigade",
    "the new bell for the chapel", "the stall fee at the weekly market", "the repair work on the quay",
    "the rota for the night watch", "the hedge along the mill road",
)  # fmt: skip
TALK_COMMENTS = (
    "needs attention before the frost", "has been discussed at three meetings already",
    "should be paid for out of the harbour dues", "is a matter for the parish, not for this council",
    "will cost more than the estimate we were given", "can wait until the spring",
    "has drawn complaints from the lower town", "deserves a proper survey before we spend a penny",
    "was promised to the residents last year", "is not as urgent as some would have us believe",
)  # fmt: skip
FAIR_START = (
    "COUNCILLOR BRENN: Before we go further, the autumn fair. I propose that we hold it on the riverbank this "
    "year, as we did when I was a boy.\nCOUNCILLOR FAYE: Let us come back to the fair at the end of the "
    "meeting, once the accounts are settled."
)
FAIR_GRANARY = (
    "COUNCILLOR HALE: On the fair again, since it was raised: the old granary has a roof, which the riverbank "
    "does not. I would rather see the fair in the old granary."
)
FAIR_SQUARE = (
    "COUNCILLOR IMRIE: Some people have asked for the market square, but the square is far too small for the "
    "fair and all the carts that come with it."
)
FAIR_DECISION = (
    "MAYOR ODA: Then let us settle the autumn fair, as promised. The riverbank floods in October, and the old "
    "granary is being re-roofed until the winter. I put forward the east meadow.\nCOUNCILLOR BRENN: I will "
    "not stand in the way. The east meadow it is.\nCLERK: The motion carries, five votes to two. The autumn "
    "fair will be held in the east meadow."
)


def council_turns(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(3, 6)):
        line = f"{rng.choice(TALK_OPENERS)} {rng.choice(TALK_TOPICS)} {rng.choice(TALK_COMMENTS)}."
        lines.append(f"{rng.choice(SPEAKERS)}: {line}")
    if rng.random() < 0.3:
        lines.append("CLERK: Noted for the minutes.")
    return "\n".join(lines)


# 0004: six bird-survey reports; the largest grey plover count is in report 4, just past the middle.
SITES = ("Heron Point", "Dunmore Sands", "Wren Flats", "Cray Hollow", "Kettle Bay", "Sable Marsh")
SPECIES = ("redshank", "curlew", "lapwing", "dunlin", "teal", "wigeon", "oystercatcher", "shelduck", "knot")
SURVEY_LINES = (
    "Observers recorded {n} {species} along the {place}.",
    "The wind was {wind} for most of the morning, and visibility was {vis}.",
    "A count of {n} {species} was made from the {place} as the tide turned.",
    "The team noted {n} {species} feeding close to the {place}.",
    "Conditions were {vis}, with a {wind} wind, when the second count began.",
    "Disturbance from walkers near the {place} moved a flock of {species} twice during the count.",
    "Between the two counts, {n} {species} flew in from the open water and settled by the {place}.",
)  # fmt: skip
PLACES = (
    "sea wall",
    "creek mouth",
    "saltmarsh edge",
    "shingle spit",
    "old jetty",
    "reed beds",
    "tidal pools",
)
WINDS = ("light and westerly", "a steady northerly", "gusty from the south", "calm", "fresh from the east")
VISIBILITY = ("good", "poor in patches of fog", "excellent", "fair", "reduced by drizzle")
PLOVER_KEYS = {
    "Heron Point": "At Heron Point the team counted 41 grey plovers on the mudflats at low tide.",
    "Cray Hollow": "At Cray Hollow the team counted 57 grey plovers roosting on the shingle bank.",
    "Wren Flats": "No grey plovers were seen at Wren Flats on either count.",
    "Sable Marsh": "At Sable Marsh the team counted 29 grey plovers spread along the creek.",
}


def survey_paragraph(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(4, 7)):
        line = rng.choice(SURVEY_LINES).format(
            n=rng.randint(3, 240), species=rng.choice(SPECIES), place=rng.choice(PLACES),
            wind=rng.choice(WINDS), vis=rng.choice(VISIBILITY),
        )  # fmt: skip
        lines.append(line[0].upper() + line[1:])
    return " ".join(lines)


def surveys(rng: random.Random, target: int) -> str:
    """Six reports of about target/6 words each; a site's plover sentence early in its own report."""
    reports = []
    for number, site in enumerate(SITES, start=1):
        key = PLOVER_KEYS.get(site)
        body = assemble(rng, survey_paragraph, [Key(0.1, key)] if key else [], target // len(SITES))
        reports.append(f"Report {number} of 6: winter wader survey at {site}\n\n{body}")
    return "\n\n".join(reports)


# 0005: a warehouse inventory table; the row asked about is near the top.
INVENTORY_ADJECTIVES = (
    "brass", "iron", "tin", "oak", "pine", "wool", "linen", "glass", "clay", "copper", "steel", "leather",
    "cedar", "hemp", "pewter", "wicker", "slate", "felt", "cork", "bone",
)  # fmt: skip
INVENTORY_NOUNS = (
    "hinge", "lantern", "bucket", "ladle", "bowl", "crate", "rope", "basket", "kettle", "jug", "hook", "bolt",
    "mallet", "spoon", "plate", "tray", "funnel", "barrel", "sieve", "whistle", "bell", "latch", "comb", "pail",
    "candlestick", "chest", "ladder", "broom", "shovel", "spindle",
)  # fmt: skip
KETTLE_ROW = "| QX-7781 | copper kettle | Shelf 23 | 14 |"
TABLE_HEAD = (
    "Lantern Street warehouse: stocktake of the third quarter. One row per item: item code, item, shelf, "
    "units in stock.\n\n| Code | Item | Shelf | Units |\n| --- | --- | --- | --- |"
)


def inventory(rng: random.Random, target: int) -> str:
    names = [
        f"{a} {n}" for a in INVENTORY_ADJECTIVES for n in INVENTORY_NOUNS if f"{a} {n}" != "copper kettle"
    ]
    codes = [c for c in rng.sample(range(1000, 10000), len(names)) if c != 7781]
    rows = []
    for name, code in zip(rng.sample(names, len(names)), codes, strict=False):
        rows.append(f"| QX-{code} | {name} | Shelf {rng.randint(1, 40)} | {rng.randint(0, 300)} |")
        if words(TABLE_HEAD) + sum(map(words, rows)) >= target:
            break
    rows.insert(round(0.08 * len(rows)), KETTLE_ROW)
    return TABLE_HEAD + "\n" + "\n".join(rows)


# 0006: notes on an invented language; the rule and "vel" near the start, "darun" near the end.
GRAMMAR = (
    "Notes on Ossic, as taught in the river villages. Ossic places every modifier after the word it "
    "modifies: an adjective follows its noun, and a noun that describes another noun also follows it. So "
    "'hosk brem' means 'red house' (hosk = house, brem = red), and 'tamor hosk' means 'house door' (tamor = "
    "door). Ossic has no articles. What follows is the glossary, in the order in which the words were "
    "collected, with example phrases between its sections."
)
VEL = "vel — stone (noun)"
DARUN = "darun — bridge (noun)"
OSSIC_RESERVED = frozenset({"vel", "darun", "hosk", "brem", "tamor"})
SYLLABLES = (
    "ka",
    "lo",
    "mir",
    "te",
    "su",
    "dra",
    "on",
    "el",
    "ba",
    "ri",
    "gu",
    "ne",
    "tha",
    "po",
    "ish",
    "ar",
)
OSSIC_NOUNS = (
    "river", "tree", "road", "hill", "field", "boat", "village", "mill", "well", "wall", "gate", "tower",
    "market", "song", "bread", "salt", "horse", "sheep", "goat", "dog", "bird", "fish", "apple", "rain",
    "snow", "wind", "fire", "lamp", "rope", "net", "cart", "wheel", "window", "roof", "bell", "cup", "knife",
    "cloak", "boot", "ring", "coin", "letter", "book", "key", "chair", "table", "bed", "oven", "path", "lake",
    "island", "shore", "cloud", "moon", "sun", "star", "winter", "summer", "harvest", "festival", "mother",
    "father", "child", "friend", "stranger", "teacher", "farmer", "sailor", "smith", "baker", "weaver",
    "shepherd", "hunter", "singer", "garden", "forest", "meadow", "valley", "cave", "spring", "storm",
)  # fmt: skip
OSSIC_ADJECTIVES = (
    "broken", "old", "new", "small", "tall", "wide", "narrow", "cold", "warm", "dark", "bright", "quiet",
    "loud", "green", "white", "black", "yellow", "blue", "heavy", "light", "wet", "dry", "sweet", "bitter",
    "empty", "full", "long", "short", "slow", "quick", "kind", "proud", "hidden", "golden", "wooden", "iron",
)  # fmt: skip


def ossic_lexicon(rng: random.Random) -> tuple[dict[str, str], dict[str, str]]:
    """Invented words (unique, none reserved) for every noun and adjective: (nouns, adjectives) word -> meaning."""
    meanings = [*OSSIC_NOUNS, *OSSIC_ADJECTIVES]
    used = set(OSSIC_RESERVED)
    lexicon: dict[str, str] = {}
    for meaning in meanings:
        word = ""
        while not word or word in used:
            word = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 3)))
        used.add(word)
        lexicon[word] = meaning
    nouns = {w: m for w, m in lexicon.items() if m in OSSIC_NOUNS}
    return nouns, {w: m for w, m in lexicon.items() if m in OSSIC_ADJECTIVES}


def ossic_examples(rng: random.Random, nouns: dict[str, str], adjectives: dict[str, str], count: int) -> str:
    """`count` example phrases that follow the rule: noun + adjective, or noun + describing noun."""
    lines = []
    for _ in range(count):
        head = rng.choice(list(nouns))
        modifier = rng.choice([w for w in (*nouns, *adjectives) if w != head])
        meaning = {**nouns, **adjectives}[modifier]
        lines.append(f"Example: '{head} {modifier}' means '{meaning} {nouns[head]}'.")
    return "\n".join(lines)


def glossary(rng: random.Random, target: int) -> str:
    """Grammar notes, then sections of glossary entries and example phrases, until `target` words."""
    nouns, adjectives = ossic_lexicon(rng)
    entries = [f"{w} — {m} (noun)" for w, m in nouns.items()] + [
        f"{w} — {m} (adjective)" for w, m in adjectives.items()
    ]
    entries = rng.sample(entries, len(entries))
    per_section = len(entries) // 8
    sections = [entries[k * per_section : (k + 1) * per_section] for k in range(8)]
    sections[-1] += entries[8 * per_section :]
    sections[0].insert(2, VEL)
    sections[-1].insert(len(sections[-1]) - 3, DARUN)
    remaining = target - words(GRAMMAR) - sum(words(e) for e in entries) - words(VEL) - words(DARUN)
    examples = remaining // (7 * 6)  # examples per section: 7 example sections, 6 words per example
    blocks = [GRAMMAR]
    for number, section in enumerate(sections, start=1):
        blocks.append(f"Glossary, part {number} of 8\n" + "\n".join(section))
        if number < len(sections):
            blocks.append(ossic_examples(rng, nouns, adjectives, max(1, examples)))
    return "\n\n".join(blocks)


@dataclass(frozen=True)
class Item:
    """One sample row; `build(rng, target_words)` writes its context; `unique`: phrases occurring once."""

    number: int
    domain: str
    sub_domain: str
    difficulty: str
    length: str
    question: str
    choices: tuple[str, str, str, str]
    answer: str
    target_words: int
    build: Callable[[random.Random, int], str]
    unique: tuple[str, ...]


def build_chronicle(rng: random.Random, target: int) -> str:
    title = "The Chronicle of Marrow Ford, as kept by the parish"
    return title + "\n\n" + assemble(rng, chronicle, [Key(0.04, LIGHTHOUSE), Key(0.3, FAMINE)], target)


def build_repository(rng: random.Random, target: int) -> str:
    head = "Repository: tollgate (a toll-road accounting package). Files are listed one after another."
    return head + "\n\n" + assemble(rng, code_files(rng), [Key(0.45, CONSTANTS), Key(0.55, BILLING)], target)


def build_minutes(rng: random.Random, target: int) -> str:
    head = "Minutes of the Marrow Ford council, ordinary meeting. Transcript of the discussion."
    keys = [Key(0.05, FAIR_START), Key(0.5, FAIR_GRANARY), Key(0.7, FAIR_SQUARE), Key(0.96, FAIR_DECISION)]
    return head + "\n\n" + assemble(rng, council_turns, keys, target)


ITEMS = (
    Item(
        1, "Single-Document QA", "Literary", "easy", "short",
        "According to the chronicle, who was the first keeper of the lighthouse on Gull Point?",
        ("Tomas Rell, the ferryman", "Ilse Varden, who had mended nets on the quay", "Maud Osric, the village baker",
         "Edric Vane, the mayor"),
        "B", 3600, build_chronicle, ("first keeper", "Ilse Varden", "Tomas Rell", "Maud Osric", "Edric Vane"),
    ),
    Item(
        2, "Code Repository Understanding", "Code repo QA", "hard", "short",
        "In this repository, what value does late_fee(10) in tollgate/billing.py return?",
        ("34", "24", "0", "28"),
        "D", 3700, build_repository,
        ("GRACE_DAYS = 2", "BASE_LATE_FEE = 4", "DAILY_LATE_FEE = 3", "def late_fee(", "tollgate/billing.py"),
    ),
    Item(
        3, "Long-dialogue History Understanding", "Dialogue history QA", "easy", "medium",
        "By the end of the meeting, where has the council decided to hold the autumn fair?",
        ("In the east meadow", "On the riverbank", "In the old granary", "In the market square"),
        "A", 4000, build_minutes, ("The motion carries", "market square", "I put forward the east meadow"),
    ),
    Item(
        4, "Multi-Document QA", "Academic", "hard", "medium",
        "Across all six survey reports, which site recorded the largest count of grey plovers?",
        ("Heron Point", "Sable Marsh", "Cray Hollow", "Wren Flats"),
        "C", 4200, surveys, ("41 grey plovers", "57 grey plovers", "29 grey plovers", "No grey plovers"),
    ),
    Item(
        5, "Long Structured Data Understanding", "Table QA", "easy", "long",
        "According to the inventory table, on which shelf is item QX-7781 (copper kettle) stored?",
        ("Shelf 32", "Shelf 3", "Shelf 23", "Shelf 13"),
        "C", 4500, inventory, ("QX-7781", "copper kettle"),
    ),
    Item(
        6, "Long In-context Learning", "New language translation", "hard", "long",
        "Using the grammar notes and the glossary, what is the correct English translation of the Ossic phrase "
        "'darun vel'?",
        ("river stone", "stone bridge", "bridge stone", "broken bridge"),
        "B", 4800, glossary, (VEL, DARUN, "— broken (adjective)", "— river (noun)", "'tamor hosk'"),
    ),
)  # fmt: skip


def build_row(item: Item) -> dict[str, str]:
    """The row of one item, its context from a generator seeded by the item number."""
    context = item.build(random.Random(20260101 + item.number), item.target_words)
    a, b, c, d = item.choices
    return {
        "_id": f"{ID_PREFIX}{item.number:04d}", "domain": item.domain, "sub_domain": item.sub_domain,
        "difficulty": item.difficulty, "length": item.length, "question": item.question,
        "choice_A": a, "choice_B": b, "choice_C": c, "choice_D": d, "answer": item.answer, "context": context,
    }  # fmt: skip


def check_row(item: Item, row: dict[str, str]) -> None:
    """Every key phrase once, no repeated choice, the size in range."""
    for phrase in item.unique:
        count = row["context"].count(phrase)
        if count != 1:
            raise AssertionError(f"{row['_id']}: {phrase!r} occurs {count} times")
    if len(set(item.choices)) != 4:
        raise AssertionError(f"{row['_id']}: repeated choice")
    if not 3000 <= words(row["context"]) <= 5000:
        raise AssertionError(f"{row['_id']}: {words(row['context'])} words")


def build_rows() -> list[dict[str, str]]:
    rows = [build_row(item) for item in ITEMS]
    for item, row in zip(ITEMS, rows, strict=True):
        check_row(item, row)
    return rows


def render(rows: Sequence[dict[str, str]]) -> bytes:
    return (json.dumps(list(rows), ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def main() -> None:
    rows = build_rows()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_bytes(render(rows))
    for row in rows:
        print(row["_id"], row["difficulty"], row["length"], words(row["context"]), "words")


if __name__ == "__main__":
    main()
