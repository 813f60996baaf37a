"""A synthetic long-conversation benchmark in the shape of LoCoMo (Maharana et al., ACL 2024), built here.

LoCoMo itself is licensed for non-commercial use only and is not shipped; this generator writes conversations with
the same structure, deterministically (``random.Random(seed)``):

- ``CONVERSATIONS`` conversations between two people, each of ``SESSIONS`` dated sessions (1-5 weeks apart, starting
  in January 2023), 10-40 turns each; the speakers mostly alternate, but a session may open with either of them and
  a speaker sometimes says two turns in a row (so some turns have no partner, as in LoCoMo);
- every session mixes small talk with *events* of either person (adopting a pet, a trip, a new job, a relative moving
  to a city and later opening a shop there, a new interest), often told with a relative time expression ("yesterday",
  "last weekend", "two weeks ago") that only the session date resolves, and with distractor turns that reuse the same
  words without being evidence;
- questions of LoCoMo's four types with their evidence turns: ``single-hop`` (one turn answers it, paraphrased),
  ``multi-hop`` (two turns of different sessions joined by a name the question does not contain: "What kind of
  business does Alice's sister run?" needs "My sister Emma moved to Lisbon" and "Emma opened a little bakery"), ``temporal``
  ("When did Alice go kayaking?", answered by the session date and the turn's relative expression; "What did Alice do
  last May?", asked a week after the last session) and ``open-domain`` (an inference from an interest, with few words
  in common with the evidence).

:func:`build` returns :class:`Conversation` s; the speaker ``A`` of each is mapped to the role ``user`` and ``B`` to
``assistant`` when loaded (one memory session per session, one turn per utterance).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import date, timedelta

CONVERSATIONS = 6
SESSIONS = 16
SEED = 45

_PEOPLE = [
    ("Alice", "Bob"),
    ("Maria", "Tom"),
    ("Priya", "Jonas"),
    ("Chen", "Sofia"),
    ("Omar", "Lena"),
    ("Kenji", "Ana"),
    ("Grace", "Mateo"),
    ("Nadia", "Felix"),
]
_PETS = [("dog", "Biscuit"), ("cat", "Miso"), ("parrot", "Kiwi"), ("rabbit", "Clover"), ("dog", "Pepper")]
_PET_Q = "What is the name of {p}'s {animal}?"
#: (what was done, where, the thing, the question's verb phrase)
_TRIPS = [
    ("went kayaking", "on Lake Tahoe", "kayaking", "go kayaking"),
    ("ran a half marathon", "in Chicago", "a half marathon", "run a half marathon"),
    ("went camping", "near Yosemite", "camping", "go camping"),
    ("visited my grandparents", "in Porto", "a visit to grandparents", "visit their grandparents"),
    ("took a pottery workshop", "downtown", "a pottery workshop", "take a pottery workshop"),
    ("went to a jazz concert", "at the Blue Note", "a jazz concert", "go to a jazz concert"),
    ("hiked a glacier trail", "in Iceland", "a glacier hike", "hike a glacier trail"),
    ("volunteered at a food bank", "near my office", "volunteering at a food bank", "volunteer at a food bank"),
]
_REL = ["yesterday", "last weekend", "two weeks ago", "last Friday", "last week", "a few days ago"]
_JOBS = [
    ("data analyst", "a hospital"),
    ("sous chef", "an Italian restaurant"),
    ("lab technician", "a vaccine startup"),
    ("librarian", "the city library"),
    ("park ranger", "the national park"),
]
_RELATIVES = [
    ("sister", "Emma", "Lisbon", "bakery"),
    ("brother", "Lucas", "Denver", "bike shop"),
    ("cousin", "Hana", "Osaka", "tea house"),
    ("uncle", "Victor", "Montreal", "bookstore"),
    ("aunt", "Rosa", "Seville", "flower shop"),
]
_INTERESTS = [
    (
        "I've been reading a lot about black holes and how telescopes image them",
        "Would {p} enjoy a documentary about galaxies?",
    ),
    ("I joined a community choir, singing every Tuesday evening", "Would {p} like going to an a cappella show?"),
    ("I started growing tomatoes and basil on my balcony", "Would {p} be interested in a gardening workshop?"),
    ("I've gotten really into baking sourdough bread", "Would {p} appreciate a gift of a proofing basket?"),
    ("I've been learning to play chess online every night", "Would {p} enjoy a strategy board game club?"),
    ("I've been volunteering at the animal shelter on weekends", "Is {p} likely to support animal welfare charities?"),
]
_SMALL = [
    "How was your week?",
    "Pretty busy, but good overall.",
    "That sounds amazing!",
    "Haha, I know, right?",
    "I've been so tired lately, work is hectic.",
    "Let's catch up again soon.",
    "Did you watch the game on Sunday?",
    "Not really, I was cleaning the apartment all day.",
    "The weather has been so strange this month.",
    "I keep meaning to call my parents more often.",
    "Thanks for listening, it means a lot.",
    "Same here, I needed this chat.",
    "What are you cooking these days?",
    "Mostly pasta, nothing fancy.",
    "I'm trying to sleep earlier, with mixed results.",
    "Honestly, me too.",
]
_REPLIES = [
    "Wow, that's great! How was it?",
    "That sounds wonderful, tell me more.",
    "Oh nice, I'm so happy for you!",
    "Really? That's exciting news.",
    "I'd love to hear how that goes.",
]
_DISTRACT = [
    "I'd love to try {thing} someday, but I never find the time.",
    "My friend keeps telling me about {thing}, I'm not convinced.",
    "I saw an ad for {thing} yesterday and thought of you.",
]


@dataclass
class Turn:
    """One utterance: its speaker (``A``/``B`` by position, ``name``) and text."""

    speaker: str
    name: str
    text: str
    key: tuple[int, int] = (0, 0)  # (session index, turn index)


@dataclass
class Question:
    """A question with its type, the evidence turns (keys), and the date it is asked."""

    text: str
    type: str
    evidence: list[tuple[int, int]]
    asked: date


@dataclass
class Conversation:
    """Two people, their dated sessions of turns, and the questions about them."""

    cid: str
    names: tuple[str, str]
    dates: list[date]
    sessions: list[list[Turn]] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)


def _session_turns(
    rng: random.Random, names: tuple[str, str], events: list[tuple[int, str, str | None]]
) -> list[tuple[int, str, str | None]]:
    """(speaker index, text, event tag) of one session: small talk around the events, each answered by the other."""
    out: list[tuple[int, str, str | None]] = []
    who = rng.randrange(2)
    for _ in range(rng.randint(4, 10)):
        out.append((who, rng.choice(_SMALL), None))
        who = 1 - who if rng.random() > 0.15 else who
    for sp, text, tag in events:
        out.append((sp, text, tag))
        out.append((1 - sp, rng.choice(_REPLIES), None))
        for _ in range(rng.randint(2, 6)):
            out.append((who, rng.choice(_SMALL), None))
            who = 1 - who if rng.random() > 0.2 else who
    return out


def build(conversations: int = CONVERSATIONS, sessions: int = SESSIONS, seed: int = SEED) -> list[Conversation]:
    """The benchmark: ``conversations`` conversations of ``sessions`` sessions, with their questions."""
    rng = random.Random(seed)
    out = []
    for c in range(conversations):
        names = _PEOPLE[c % len(_PEOPLE)]
        d = date(2023, 1, 9) + timedelta(days=rng.randint(0, 20))
        dates = []
        for _ in range(sessions):
            dates.append(d)
            d += timedelta(days=rng.randint(7, 35))
        conv = Conversation(f"conv-{c}", names, dates)
        asked = dates[-1] + timedelta(days=7)
        plan: list[list[tuple[int, str, str | None]]] = [[] for _ in range(sessions)]
        qs: list[tuple[str, str, list[str], date]] = []
        tag_no = 0

        def event(s: int, sp: int, text: str) -> str:
            nonlocal tag_no
            tag_no += 1
            tag = f"e{tag_no}"
            plan[s].append((sp, text, tag))
            return tag

        # pets: single-hop
        for sp in (0, 1):
            animal, pet = _PETS[(2 * c + sp) % len(_PETS)]
            s = rng.randrange(sessions)
            t = event(s, sp, f"We finally adopted a {animal}! We named her {pet}, she is adorable.")
            qs.append((_PET_Q.format(p=names[sp], animal=animal), "single-hop", [t], asked))
        # jobs: single-hop
        for sp in (0, 1):
            job, place = _JOBS[(c + 2 * sp) % len(_JOBS)]
            s = rng.randrange(sessions)
            t = event(s, sp, f"Big news: I start next month as a {job} at {place}.")
            qs.append((f"What job does {names[sp]} start next month?", "single-hop", [t], asked))
        # trips: temporal (when) and month questions
        trips = rng.sample(_TRIPS, 4)
        for i, (did, where, what, ask) in enumerate(trips):
            sp = i % 2
            s = rng.randrange(1, sessions)
            rel = rng.choice(_REL)
            t = event(s, sp, f"I {did} {where} {rel}, it was unforgettable.")
            qs.append((f"When did {names[sp]} {ask}?", "temporal", [t], asked))
            # a distractor: the other person mentions the same thing without doing it
            ds = rng.randrange(sessions)
            plan[ds].append((1 - sp, rng.choice(_DISTRACT).format(thing=what), None))
        # relatives: multi-hop (moved to a city, later opened a shop there: joined by the relative's name)
        for sp in (0, 1):
            rel, rname, city, shop = _RELATIVES[(c + 3 * sp) % len(_RELATIVES)]
            s1 = rng.randrange(0, sessions // 2)
            s2 = rng.randrange(sessions // 2, sessions)
            t1 = event(s1, sp, f"My {rel} {rname} just moved to {city} for a fresh start.")
            t2 = event(s2, sp, f"{rname} finally opened a little {shop}, we are all so proud.")
            # each question names one of the two turns' topics; the other turn is reached through the relative's name
            qs.append((f"What kind of business does {names[sp]}'s {rel} run?", "multi-hop", [t1, t2], asked))
            qs.append(
                (f"In which city is the {shop} that {names[sp]}'s relative opened?", "multi-hop", [t1, t2], asked)
            )
        # interests: open-domain
        for i, (said, q) in enumerate(rng.sample(_INTERESTS, 4)):
            sp = i % 2
            s = rng.randrange(sessions)
            t = event(s, sp, f"{said}.")
            qs.append((q.format(p=names[sp]), "open-domain", [t], asked))
        # month questions (temporal, relative to the asking date): one event session per chosen month
        by_month: dict[tuple[int, int], list[int]] = {}
        for s, dd in enumerate(dates):
            by_month.setdefault((dd.year, dd.month), []).append(s)
        months = sorted(k for k in by_month if (asked.year, asked.month) != k)
        for y, m in rng.sample(months, min(3, len(months))):
            s = by_month[(y, m)][0]
            sp = rng.randrange(2)
            did, where, _what, _ask = rng.choice(_TRIPS)
            t = event(s, sp, f"Today I {did} {where}, what a day!")
            month = date(y, m, 1).strftime("%B")
            last = "last " if (asked.year - y) * 12 + asked.month - m < 12 else "in "
            year = "" if last == "last " else f" {y}"
            qs.append((f"What did {names[sp]} do {last}{month}{year}?", "temporal", [t], asked))
        # turns
        tags: dict[str, tuple[int, int]] = {}
        for s in range(sessions):
            turns = []
            for sp, text, tag in _session_turns(rng, names, plan[s]):
                key = (s, len(turns))
                turns.append(Turn("AB"[sp], names[sp], text, key))
                if tag:
                    tags[tag] = key
            conv.sessions.append(turns)
        conv.questions = [Question(q, ty, [tags[t] for t in ev], a) for q, ty, ev, a in qs]
        out.append(conv)
    return out
