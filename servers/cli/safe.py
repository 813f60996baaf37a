"""Terminal-safe CLI output: text from documents (file names, PDF titles, chunk text, model answers) never reaches
the terminal as control characters.

A file name or PDF title holding an escape sequence (``ESC [ 2 J``, an OSC 8 hyperlink, a title-setting OSC) would
otherwise be interpreted by the terminal: clear the screen, rewrite lines, fake a prompt. :func:`clean` replaces
every C0 and C1 control character (except newline and tab), DEL, and the Unicode bidirectional overrides and
isolates (which reorder what is displayed, CVE-2021-42574 "Trojan Source") by a visible ``\\uXXXX`` escape; that
form is also a valid JSON string escape, so cleaned JSON stays valid JSON. :class:`SafeConsole` applies it to every
string rich renders (printed text, table cells and titles); :func:`safe_print` to plain ``print`` output.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from rich.console import Console
from rich.text import Text

#: C0 controls but tab and newline, DEL, C1 controls, bidi marks/embeddings/overrides/isolates
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def clean(text: str) -> str:
    """``text`` with every control or bidi-override character replaced by ``\\uXXXX`` (see the module docstring)."""
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


class SafeConsole(Console):
    """A rich Console whose every rendered string goes through :func:`clean` first (markup tags written by aisac
    itself are unaffected: they hold no control characters)."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        """:meth:`rich.console.Console.render_str` of ``clean(text)``."""
        return super().render_str(clean(text), **kwargs)


def safe_print(*args: Any, file: Any = None, **kwargs: Any) -> None:
    """``print`` of ``clean(str(arg))`` for each argument (to ``file``, default stdout)."""
    print(*(clean(str(a)) for a in args), file=file if file is not None else sys.stdout, **kwargs)
