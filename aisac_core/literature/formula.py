"""Chemical formulas as OPTIMADE writes them: parse ``LiFePO4`` / ``Ca3(PO4)2`` / ``LiNi0.8Co0.1Mn0.1O2`` into
element counts and write the ``chemical_formula_reduced`` of the OPTIMADE specification.

OPTIMADE v1.2, "chemical_formula_reduced": element symbols in alphabetical order, each followed by its count
when the count is not 1, the counts reduced by their greatest common divisor, integers only (``LiFePO4`` ->
``FeLiO4P``). A formula with fractional counts is scaled by the smallest power of ten (up to 10^4) that makes every
count an integer before the reduction (``LiNi0.8Co0.1Mn0.1O2`` -> ``CoLi10MnNi8O20``).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from aisac_core.literature.paper import LiteratureError

#: the 118 element symbols (IUPAC periodic table, 2016 names)
ELEMENTS = frozenset(
    """H He Li Be B C N O F Ne Na Mg Al Si P S Cl Ar K Ca Sc Ti V Cr Mn Fe Co Ni Cu Zn Ga Ge As Se Br Kr Rb Sr Y Zr
    Nb Mo Tc Ru Rh Pd Ag Cd In Sn Sb Te I Xe Cs Ba La Ce Pr Nd Pm Sm Eu Gd Tb Dy Ho Er Tm Yb Lu Hf Ta W Re Os Ir Pt
    Au Hg Tl Pb Bi Po At Rn Fr Ra Ac Th Pa U Np Pu Am Cm Bk Cf Es Fm Md No Lr Rf Db Sg Bh Hs Mt Ds Rg Cn Nh Fl Mc Lv
    Ts Og""".split()
)

#: longest formula text accepted (characters)
MAX_FORMULA_CHARS = 200

_TOKEN = re.compile(r"([A-Z][a-z]?)|(\d+(?:\.\d+)?|\.\d+)|([(\[])|([)\]])|(\s+)|(.)")


def parse_formula(text: str) -> dict[str, Fraction]:
    """Element counts of a chemical formula (``"Ca3(PO4)2"`` -> ``{"Ca": 3, "P": 2, "O": 8}``).

    Accepts element symbols with integer or decimal counts, nested parentheses or brackets with a multiplier,
    and spaces; hydrates (``·``) and charges are not formulas here.

    Raises:
        LiteratureError: empty or too long, an unknown element symbol, unbalanced parentheses, another character.
    """
    s = (text or "").strip()
    if not s:
        raise LiteratureError("the formula is empty: give one such as LiFePO4 or Ca3(PO4)2")
    if len(s) > MAX_FORMULA_CHARS:
        raise LiteratureError(f"the formula is {len(s)} characters long; at most {MAX_FORMULA_CHARS} are read")
    stack: list[dict[str, Fraction]] = [{}]
    last: dict[str, Fraction] | None = None  # the group or element a following count multiplies
    for m in _TOKEN.finditer(s):
        sym, num, opening, closing, space, other = m.groups()
        if sym is not None:
            if sym not in ELEMENTS:
                raise LiteratureError(f"{sym!r} in formula {s!r} is not an element symbol (write e.g. LiFePO4)")
            last = {sym: Fraction(1)}
            _add(stack[-1], last)
        elif num is not None:
            if last is None:
                raise LiteratureError(f"a count without an element in formula {s!r}: write counts after symbols")
            factor = Fraction(num)
            if factor <= 0:
                raise LiteratureError(f"a zero count in formula {s!r}")
            _add(stack[-1], {k: v * (factor - 1) for k, v in last.items()})
            last = None
        elif opening is not None:
            stack.append({})
            last = None
        elif closing is not None:
            if len(stack) == 1:
                raise LiteratureError(f"formula {s!r} closes a parenthesis it never opened")
            group = stack.pop()
            _add(stack[-1], group)
            last = group
        elif space is not None:
            continue
        else:
            raise LiteratureError(
                f"{other!r} in formula {s!r} is not part of a formula: use element symbols, counts and parentheses"
            )
    if len(stack) != 1:
        raise LiteratureError(f"formula {s!r} leaves a parenthesis open")
    counts = {k: v for k, v in stack[0].items() if v > 0}
    if not counts:
        raise LiteratureError(f"formula {s!r} names no element")
    return counts


def _add(into: dict[str, Fraction], counts: dict[str, Fraction]) -> None:
    for k, v in counts.items():
        into[k] = into.get(k, Fraction(0)) + v


def reduced_formula(counts: dict[str, Fraction]) -> str:
    """OPTIMADE's ``chemical_formula_reduced`` of element ``counts`` (see the module docstring).

    Raises:
        LiteratureError: a count that stays fractional after scaling by 10^4.
    """
    scale = 1
    while any((v * scale).denominator != 1 for v in counts.values()):
        scale *= 10
        if scale > 10_000:
            raise LiteratureError("the formula's counts have more than four decimals: round them")
    ints = {k: int(v * scale) for k, v in counts.items()}
    g = 0
    for v in ints.values():
        g = math.gcd(g, v)
    return "".join(f"{k}{'' if ints[k] // g == 1 else ints[k] // g}" for k in sorted(ints))


def formula_key(text: str) -> str:
    """The reduced formula of ``text`` (:func:`parse_formula` then :func:`reduced_formula`): two spellings of one
    composition (``LiFePO4``, ``FePO4Li``, ``Li2Fe2P2O8``) give one key. Raises LiteratureError as those do."""
    return reduced_formula(parse_formula(text))
