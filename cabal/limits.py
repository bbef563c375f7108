"""What an answer from outside may be: how deep, how big, which characters; and text made safe
to show.

Answers come from models and from outside agents (MCP). Before anything reads one, it is
walked once, without recursion, and every value the graph could not store or a terminal
should not print is a problem to send back: nesting beyond ``MAX_DEPTH``, more than
``MAX_ITEMS`` values, a string longer than ``MAX_STRING_CHARS``, a NUL, a lone surrogate, or a
control character (C0 or C1) other than newline, carriage return and tab.

Text that reaches a terminal or a file meant for people may still hold such characters (a
graph written by other means); ``printable`` is the one function that removes them there, the
graph keeping the original.
"""

from __future__ import annotations

import re
from typing import Any

from cabal.errors import AnswerProblem

MAX_DEPTH = 32
MAX_ITEMS = 20_000
MAX_STRING_CHARS = 100_000
MAX_PROBLEMS = 20  # one answer's problems, beyond which more would only be noise

_FORBIDDEN = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
_NAMES = {"\x00": "a NUL character", "\x1b": "an escape character (ESC)", "\x7f": "a DEL character"}


def unprintable(text: str) -> str | None:
    """What is wrong with ``text``'s characters, or None when every one may be stored and shown."""
    found = _FORBIDDEN.search(text)
    if found is None:
        return None
    char = found.group()
    if "\ud800" <= char <= "\udfff":
        return f"a lone surrogate (U+{ord(char):04X}) at position {found.start()}"
    name = _NAMES.get(char, f"a control character (U+{ord(char):04X})")
    return f"{name} at position {found.start()}"


def answer_problems(answer: Any) -> list[AnswerProblem]:
    """Every way ``answer`` breaks the limits above, each with its path (``versions.0.content``)."""
    problems: list[AnswerProblem] = []
    stack: list[tuple[Any, str, int]] = [(answer, "", 0)]
    items = 0
    while stack and len(problems) < MAX_PROBLEMS:
        value, path, depth = stack.pop()
        items += 1
        if items > MAX_ITEMS:
            problems.append(AnswerProblem("", f"the answer holds more than {MAX_ITEMS} values; answer with less"))
            break
        if isinstance(value, str):
            if len(value) > MAX_STRING_CHARS:
                problems.append(AnswerProblem(path, f"a text of {len(value)} characters; at most {MAX_STRING_CHARS}"))
            wrong = unprintable(value)
            if wrong:
                problems.append(AnswerProblem(path, f"contains {wrong}; write plain text"))
            continue
        if not isinstance(value, (dict, list)):
            continue
        if depth >= MAX_DEPTH:
            problems.append(AnswerProblem(path, f"nested more than {MAX_DEPTH} levels deep"))
            continue
        entries = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in reversed(list(entries)):
            if isinstance(key, str):
                wrong = unprintable(key)
                if wrong:
                    problems.append(AnswerProblem(path, f"a key contains {wrong}"))
            stack.append((item, f"{path}.{key}" if path else str(key), depth + 1))
    return problems


# A terminal acts on escape sequences (CSI "ESC [", OSC "ESC ]" up to BEL or ST, DCS, ...), their
# one-character C1 forms (U+009B is CSI), and lone controls such as a carriage return that
# moves back over what was printed. Newline and tab are text.
_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"                       # CSI: cursor, colours, clearing
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d-\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"  # OSC, DCS, SOS, PM, APC
    r"|\x1b[ -/]*[0-~]?"                                       # any other escape
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"                          # every other control character
)
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` as a terminal or a file for people may show it: escape sequences and control
    characters removed (newline and tab kept; CR LF is a newline, a lone CR goes), a lone
    surrogate shown as U+FFFD."""
    text = _SEQUENCE.sub("", text.replace("\r\n", "\n"))
    return _SURROGATE.sub("\ufffd", text)
