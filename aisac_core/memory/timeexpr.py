"""Dates in conversation: explicit and relative time expressions resolved against a reference date.

A turn said in a session dated 8 May 2023 that reads "I went to the support group yesterday" is about 7 May 2023;
a question asked on 20 November 2023 about "last May" means May 2023. :func:`resolve` finds such expressions in a
text and turns each into an inclusive range of calendar days (:class:`Mention`), relative to ``ref`` (the session's
date for a turn, the asking session's date for a question).

Why our own resolver and not dateparser: measured here with ``dateparser.search.search_dates`` 1.4.3
(``RELATIVE_BASE`` 2023-11-20, ``PREFER_DATES_FROM='past'``), it took 200-900 ms per sentence on this 2-core machine
(the budget of adding a turn is 15 ms), read ordinary words as dates ("do" -> 2023-11-19, "We" -> 2023-11-15),
and gives one instant where memory needs a range ("May" -> 2023-05-20, "last week and" -> 2023-11-13). The grammar
memory needs is small and is written down here (English only):

- explicit days: ISO ``2023-05-07``; ``7 May 2023``, ``7th of May``, ``May 7``, ``May 7th, 2023``;
- months: ``May 2023``, ``in May``, ``last May``, ``this May``, ``next May`` (a month without a year is the
  latest such month not after ``ref``; ``last`` skips the current one, ``next`` is the first one after ``ref``);
- years: ``in 2023``, ``last year``, ``this year``, ``next year``;
- days relative to ``ref``: ``today``, ``tonight``, ``this morning|afternoon|evening``, ``yesterday``, ``tomorrow``,
  ``the day before yesterday``;
- weeks, weekends and months relative to ``ref``: ``last|this|next week|weekend|month`` (weeks start on Monday,
  ISO 8601);
- ``N days|weeks|months|years ago`` (``N`` a number, ``a``/``an``/``one`` ... ``ten``, ``a few`` = 3,
  ``a couple of`` = 2): the day, or the whole week / month / year that far back;
- weekdays: ``last Friday``, ``on Friday`` (the latest one before ``ref``), ``next Friday`` (the first after).

Ranges are calendar days (``date``), inclusive at both ends. Nothing here reads the clock: the caller passes ``ref``.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from types import MappingProxyType

#: month names and abbreviations (English, lower case) -> month number
MONTHS: Mapping[str, int] = MappingProxyType(
    {
        **{m.lower(): i for i, m in enumerate(calendar.month_name) if m},
        **{m.lower(): i for i, m in enumerate(calendar.month_abbr) if m},
        "sept": 9,
    }
)
#: weekday names (lower case) -> ISO weekday - 1 (Monday 0)
WEEKDAYS: Mapping[str, int] = MappingProxyType({d.lower(): i for i, d in enumerate(calendar.day_name)})
_NUMBERS: Mapping[str, int] = MappingProxyType(
    {
        "a": 1,
        "an": 1,
        "one": 1,
        "two": 2,
        "three": 3,
        "four": 4,
        "five": 5,
        "six": 6,
        "seven": 7,
        "eight": 8,
        "nine": 9,
        "ten": 10,
        "a few": 3,
        "a couple of": 2,
        "a couple": 2,
        "couple of": 2,
    }
)

_MON = r"(?P<mon>" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_WD = r"(?P<wd>" + "|".join(WEEKDAYS) + r")"
_NUM = r"(?P<n>\d{1,3}|a few|a couple of|a couple|couple of|an?|one|two|three|four|five|six|seven|eight|nine|ten)"

#: (name, pattern) in priority order: a longer, more specific expression is matched before the ones inside it
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (name, re.compile(p, re.IGNORECASE))
    for name, p in [
        ("iso", r"\b(?P<y>(?:19|20)\d\d)-(?P<m>[01]\d)-(?P<d>[0-3]\d)\b"),
        ("day_mon", rf"\b{_DAY}\s+(?:of\s+)?{_MON}(?:,?\s+{_YEAR})?\b"),
        ("mon_day", rf"\b{_MON}\s+{_DAY}\b(?:,?\s+{_YEAR})?"),
        ("day_before_yesterday", r"\bthe\s+day\s+before\s+yesterday\b"),
        ("ago", rf"\b{_NUM}\s+(?P<unit>day|week|month|year)s?\s+ago\b"),
        ("rel_unit", r"\b(?P<which>last|this|next|past)\s+(?P<unit>week|weekend|month|year)\b"),
        ("rel_mon", rf"\b(?P<which>last|this|next|in|during|early|late|mid)\s+{_MON}(?:\s+{_YEAR})?\b"),
        ("mon_year", rf"\b{_MON}\s+{_YEAR}\b"),
        ("rel_wd", rf"\b(?P<which>last|this|next|on)\s+{_WD}\b"),
        ("year", rf"\b(?:in|during|since|of)\s+{_YEAR}\b"),
        ("yesterday", r"\byesterday\b"),
        ("tomorrow", r"\btomorrow\b"),
        ("today", r"\b(?:today|tonight|this\s+(?:morning|afternoon|evening))\b"),
    ]
]


@dataclass(frozen=True)
class Mention:
    """A time expression found in a text: its words, where they are (``[start, end)`` characters), and the calendar
    days it means (``first`` to ``last``, inclusive)."""

    text: str
    span: tuple[int, int]
    first: date
    last: date

    def as_dict(self) -> dict[str, str]:
        """``{text, first, last}`` with ISO dates (what results carry)."""
        return {"text": self.text, "first": self.first.isoformat(), "last": self.last.isoformat()}


def _month_range(year: int, month: int) -> tuple[date, date]:
    return date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1])


def _shift_month(year: int, month: int, delta: int) -> tuple[int, int]:
    k = year * 12 + (month - 1) + delta
    return k // 12, k % 12 + 1


def _safe_day(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def _latest_day(ref: date, month: int, day: int) -> date | None:
    """The latest ``month``/``day`` not after ``ref`` (this year's, else last year's)."""
    d = _safe_day(ref.year, month, day)
    if d is not None and d <= ref:
        return d
    return _safe_day(ref.year - 1, month, day)


def _number(s: str) -> int:
    s = s.lower()
    return int(s) if s.isdigit() else _NUMBERS.get(s, 1)


def _resolve_one(name: str, m: re.Match[str], ref: date) -> tuple[date, date] | None:
    g = {k: v for k, v in m.groupdict().items() if v is not None}
    if name == "iso":
        d = _safe_day(int(g["y"]), int(g["m"]), int(g["d"]))
        return (d, d) if d else None
    if name in ("day_mon", "mon_day"):
        month, day = MONTHS[g["mon"].lower().rstrip(".")], int(g["day"])
        d = _safe_day(int(g["year"]), month, day) if "year" in g else _latest_day(ref, month, day)
        return (d, d) if d else None
    if name == "day_before_yesterday":
        d = ref - timedelta(days=2)
        return d, d
    if name == "yesterday":
        d = ref - timedelta(days=1)
        return d, d
    if name == "tomorrow":
        d = ref + timedelta(days=1)
        return d, d
    if name == "today":
        return ref, ref
    if name == "ago":
        n, unit = _number(g["n"]), g["unit"].lower()
        if unit == "day":
            d = ref - timedelta(days=n)
            return d, d
        if unit == "week":
            start = ref - timedelta(days=ref.weekday() + 7 * n)
            return start, start + timedelta(days=6)
        if unit == "month":
            return _month_range(*_shift_month(ref.year, ref.month, -n))
        return date(ref.year - n, 1, 1), date(ref.year - n, 12, 31)
    if name == "rel_unit":
        which, unit = g["which"].lower(), g["unit"].lower()
        step = {"last": -1, "past": -1, "this": 0, "next": 1}[which]
        if unit in ("week", "weekend"):
            monday = ref - timedelta(days=ref.weekday()) + timedelta(days=7 * step)
            if unit == "weekend":
                return monday + timedelta(days=5), monday + timedelta(days=6)
            return monday, monday + timedelta(days=6)
        if unit == "month":
            return _month_range(*_shift_month(ref.year, ref.month, step))
        y = ref.year + step
        return date(y, 1, 1), date(y, 12, 31)
    if name in ("rel_mon", "mon_year"):
        month = MONTHS[g["mon"].lower().rstrip(".")]
        which = g.get("which", "in").lower()
        if "year" in g:
            year = int(g["year"])
        elif which == "next":
            year = ref.year if month > ref.month else ref.year + 1
        elif which == "last":
            year = ref.year if month < ref.month else ref.year - 1
        elif which == "this":
            year = ref.year
        else:  # in / during / early / late / mid May: the latest May not after ref
            year = ref.year if month <= ref.month else ref.year - 1
        first, last = _month_range(year, month)
        if which == "early":
            return first, first + timedelta(days=9)
        if which == "mid":
            return first + timedelta(days=10), first + timedelta(days=19)
        if which == "late":
            return first + timedelta(days=20), last
        return first, last
    if name == "rel_wd":
        which, wd = g["which"].lower(), WEEKDAYS[g["wd"].lower()]
        if which == "next":
            ahead = (wd - ref.weekday()) % 7 or 7
            d = ref + timedelta(days=ahead)
        elif which == "this":
            d = ref - timedelta(days=ref.weekday()) + timedelta(days=wd)
        else:  # last / on: the latest such weekday before ref
            back = (ref.weekday() - wd) % 7 or 7
            d = ref - timedelta(days=back)
        return d, d
    if name == "year":
        y = int(g["year"])
        return date(y, 1, 1), date(y, 12, 31)
    return None


def resolve(text: str, ref: date | datetime) -> list[Mention]:
    """The time expressions of ``text`` (grammar in the module docstring) resolved against ``ref`` (a date, or a
    date-time taken as its UTC day), in text order, never overlapping (the longer, more specific pattern wins)."""
    day = ref.astimezone(UTC).date() if isinstance(ref, datetime) and ref.tzinfo else ref
    if isinstance(day, datetime):
        day = day.date()
    taken: list[tuple[int, int]] = []
    out: list[Mention] = []
    for name, pat in _PATTERNS:
        for m in pat.finditer(text):
            s, e = m.span()
            if any(s < te and ts < e for ts, te in taken):
                continue
            rng = _resolve_one(name, m, day)
            if rng is None:
                continue
            taken.append((s, e))
            out.append(Mention(m.group(0), (s, e), rng[0], rng[1]))
    out.sort(key=lambda x: x.span)
    return out


def day_seconds(d: date) -> int:
    """Seconds since the Unix epoch at the start (00:00 UTC) of day ``d`` (the payload's time fields)."""
    return calendar.timegm(d.timetuple())


def span_seconds(mentions: list[Mention]) -> tuple[int, int] | None:
    """``(first second, last second)`` covered by ``mentions`` (UTC days), None when there are none."""
    if not mentions:
        return None
    lo = min(m.first for m in mentions)
    hi = max(m.last for m in mentions)
    return day_seconds(lo), day_seconds(hi) + 86_399
