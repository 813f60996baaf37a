"""The identifiers of the data server that become file names: a code session (its folder and the server's files for
it), a variable a frame is loaded into (its Parquet copy in the session folder), a file the server writes into a
session's ``inputs/`` folder.

Each is matched whole (``re.fullmatch``) against a closed ASCII character set: ``re.match`` with ``$`` would let a
trailing newline through (``'s1\\n'`` made a folder with a newline in its name), and ``str.isidentifier``
accepts any Unicode letter. Frame names (:data:`aisac_core.data.frames.NAME_RE`) never become a path: their cache
file is named by their hash.
"""

from __future__ import annotations

import re

from aisac_core.sessions.errors import SandboxError

#: a session name
SESSION_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
#: a variable a frame is loaded into
VARIABLE_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")
#: a file the server writes into a session's ``inputs/`` folder
INPUT_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


def check_session_name(name: object) -> str:
    """``name`` when it is a session name (:data:`SESSION_RE`: 1-64 ASCII letters, digits, ``_``, ``.`` or ``-``,
    starting with a letter or digit), else SandboxError saying what to pass."""
    if not isinstance(name, str) or not SESSION_RE.fullmatch(name):
        raise SandboxError(
            f"session name {name!r} is invalid: use 1-64 letters, digits, '_', '.' or '-', "
            "starting with a letter or digit (e.g. 'analysis-1')"
        )
    return name


def check_variable(var: object) -> str:
    """``var`` when it is a variable name a frame may be loaded into (:data:`VARIABLE_RE`: an ASCII letter, then up
    to 63 ASCII letters, digits or ``_``), else SandboxError saying what to pass."""
    if not isinstance(var, str) or not VARIABLE_RE.fullmatch(var):
        raise SandboxError(
            f"variable name {var!r} is invalid: an ASCII letter, then up to 63 ASCII letters, digits or '_' "
            "(e.g. 'df_sales')"
        )
    return var


def check_input_name(name: object) -> str:
    """``name`` when it is a file name the server may write into a session's ``inputs/`` folder
    (:data:`INPUT_NAME_RE`: 1-128 ASCII letters, digits, ``_``, ``.`` or ``-``, starting with a letter or digit),
    else SandboxError."""
    if not isinstance(name, str) or not INPUT_NAME_RE.fullmatch(name):
        raise SandboxError(
            f"file name {name!r} is invalid: 1-128 letters, digits, '_', '.' or '-', starting with a letter or digit"
        )
    return name
