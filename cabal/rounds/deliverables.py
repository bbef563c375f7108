"""What the user's words name as products: a request's deliverables, and the renames, additions
and removals a change to the plan asks for. The simulated Chair reads them (``simulated.py``).

A small grammar of lists, not a pattern per phrasing (each pattern missed the next phrasing):

    request   := list-lines | sentence+       list-lines: bullets, numbers, or lines after a "...:" line
    sentence  := lead? object                 lead: an ask ("we need", "please prepare", "deliverables:")
    object    := head (":" | " - ") list      head: a count ("three things", "the following") or a topic
               | list                         ("our move to the cloud"); the list after it is what is asked
    list      := item ((";" | ",") item)* (","? joiner item)?          joiner: and, plus, as well as
    item      := marker? determiner* words    marker: (1), 1), 1., first,

Commas (or semicolons) alone make a list only when every part starts like a thing ("a menu, a
rota, a guide") or a count announced it; else they are an aside ("tally, a tool that counts lines"). An "and" joins
two things when a thing follows it ("a menu and a map"), else it is inside one ("risks and
benefits summary"). A count with no list after it ("we need three things.") announces the next
sentences.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

DEFAULT_DELIVERABLES = ("Overview", "Plan of action", "Risks and open questions")  # a request that names none
MAX_DELIVERABLES = 8
NAME_CHARS = 80

_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
            "ten": 10, "a couple of": 2}
_MAKE = (r"(?:write|draft|prepare|produce|create|make|compile|deliver|provide|add|build|design|develop|send\s+(?:us|me)|"
         r"put\s+together|draw\s+up|come\s+up\s+with|give\s+(?:us|me)|get\s+(?:us|me)|help\s+(?:us|me)\s+with)")
_WANT = (r"(?:\s+(?:need|want|require|expect)|(?:\s+(?:am|are)|'m|'re)?\s+(?:ask(?:ing)?|looking)\s+for"
         r"|(?:\s+would|'d)\s+(?:like|love))")
# The ask a sentence's deliverables follow; the object starts where the match ends.
_LEAD = re.compile(
    r"\b(?:we|i)(?:\s+(?:also|still|really))?" + _WANT + r"\s+"
    r"(?:(?:you|the\s+team)\s+to\s+" + _MAKE + r"\s+)?(?:to\s+(?:know|have|get|see|receive|understand)\s+)?"
    r"|\b(?:what|all)\s+(?:we|i)\s+(?:need|want)(?:\s+(?:is|are))?\s*(?=:|\s)"
    r"|\b(?:can|could|would|will)\s+(?:you|the\s+team)\s+(?:please\s+)?" + _MAKE + r"\s+"
    r"|\b(?:you|the\s+team)\s+(?:should|must|will|shall|can)\s+" + _MAKE + r"\s+"
    r"|\b(?:the\s+|our\s+)?deliverables?\b\s*(?:are|is|:)\s*"
    r"|^(?:please\s+)?" + _MAKE + r"\s+(?:(?:us|me)\s+)?", re.IGNORECASE)
# A head whose list follows a colon though no ask leads it: an imperative of planning.
_PLANNING = re.compile(r"^(?:please\s+)?(?:plan|prepare|organi[sz]e|set\s+up|sort\s+out|get\s+ready|help\s+(?:us|me)"
                       r"\s+(?:with|plan|prepare))\b", re.IGNORECASE)
_COUNT = re.compile(
    r"^(?:(?:all\s+)?(?:the\s+following|these|this|what\s+follows)(?:\s+\w+)?|(?:the\s+)?(?P<n>\d+|one|two|three|four|"
    r"five|six|seven|eight|nine|ten|a\s+couple\s+of|a\s+few|several|some)\s+(?:\w+[\s-]+)?(?:things|items|documents|"
    r"deliverables|products|pieces(?:\s+of\s+work)?|parts|outputs|artifacts|artefacts|docs)(?:\s+from\s+(?:you|the\s+team))?)$",
    re.IGNORECASE)
_HEAD = re.compile(r"\s*:\s+|\s*:$|\s+[-–—]\s+")  # what ends a head: a colon, a spaced dash
_THING = r"(?:an?|the|our|your|its|their|some|one|two|three|four|five|both|\(?\d{1,2}[.)]|\(?[a-h]\))\s"
_JOIN = re.compile(r",?\s+(?:and|plus|as\s+well\s+as)\s+(?:also\s+|then\s+|finally\s+)?(?=" + _THING + ")", re.IGNORECASE)
_JOINED = re.compile(r"^(?:and|plus|as\s+well\s+as|or)\s", re.IGNORECASE)
_MARKER = re.compile(r"^(?:\(?\d{1,2}[.)]|\(?[a-h]\)|(?:first|second|third|fourth|fifth|last|final)(?:ly)?,?)\s+",
                     re.IGNORECASE)
_LEADING = re.compile(r"^(?:(?:and|or|also|then|plus|finally|as\s+well\s+as|both|either)\s+)*"
                      r"(?:(?:a|an|the|some|our|your|which)\s+)?", re.IGNORECASE)
_TRAILING = re.compile(r"(?:\s+(?:too|as\s+well|please|for\s+us|for\s+me))+$", re.IGNORECASE)
_NOT_A_THING = frozenset({"it", "them", "this", "that", "these", "those", "one", "sure", "something", "anything",
                          "everything", "more", "help", "you", "us", "me"})
_BULLET = re.compile(r"^\s*(?:[-*•+]|\d{1,2}[.)]|[a-z]\))\s+(\S.*)$", re.MULTILINE)
_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+")


def deliverables(request: str, *, default: tuple[str, ...] = DEFAULT_DELIVERABLES) -> tuple[str, ...]:
    """The products a request names, as product names, in its order; ``default`` when it names none.

    >>> deliverables("We need three things: a revised on-call policy, a rota, and a one-page guide.")
    ('Revised on-call policy', 'Rota', 'One-page guide')
    """
    found = _list_lines(request)
    if not found:
        announced = 0  # things a count announced ("we need three things."), for the sentences after it
        for sentence in _SENTENCES.split(request):
            if announced:
                items = _items(_MARKER.sub("", sentence.strip()).rstrip(".!?"), loose=True)
                announced = max(0, announced - len(items)) if items else 0
                found += items
                continue
            items, announced = _asked(sentence.strip())
            found += items
    return tuple(dict.fromkeys(found))[:MAX_DELIVERABLES] or default


def _list_lines(request: str) -> list[str]:
    """Items of a bulleted or numbered list, or the plain lines after a line that ends with a colon."""
    found = [item for match in _BULLET.finditer(request) if (item := _item(match[1]))]
    if found:
        return found
    lines = request.splitlines()
    for index, line in enumerate(lines[:-1]):
        if line.rstrip().endswith(":"):
            block = []
            for after in lines[index + 1:]:
                if not after.strip():
                    break
                block.append(after)
            if len(block) >= 2:
                return [item for line in block if (item := _item(line))]
    return []


def _asked(sentence: str) -> tuple[list[str], int]:
    """The things one sentence asks for, and how many more a count announced with no list after it."""
    lead = _LEAD.search(sentence)
    text = sentence[lead.end():] if lead else sentence
    text = text.rstrip(".!?").strip()
    head, tail = _head(text)
    if tail is not None:
        count = _COUNT.match(head)
        if not head or count:
            return _items(tail, loose=True), 0
        if lead or _PLANNING.match(head):
            listed = _items(tail, loose=False)
            if len(listed) > 1:
                return listed, 0
            text = head  # "Write the README: short, friendly": the head is what is asked
    if lead is None or re.match(r"to\s", text, re.IGNORECASE):
        return [], 0  # no ask, or an action to take ("we need to switch ..."): not a thing to deliver
    count = _COUNT.match(text)
    if count:
        return [], _NUMBERS.get(str(count["n"] or "").lower(), int(count["n"]) if (count["n"] or "").isdigit() else 9)
    return _items(text, loose=False), 0


def _head(text: str) -> tuple[str, str | None]:
    """``text`` split at the colon (or spaced dash) that ends its head; no tail when it has none."""
    match = _HEAD.search(text)
    if match is None:
        return text, None
    return text[:match.start()].strip(), text[match.end():].strip()


def _items(text: str, *, loose: bool) -> list[str]:
    """The things of a list. ``loose``: a count or a colon announced it, so commas alone separate."""
    parts = [part for part in re.split(r"\s*;\s*", text) if part]
    semicolons = len(parts) > 1
    pieces = [piece for part in parts for piece in re.split(r"\s*,\s*", part) if piece]
    joined = bool(_JOINED.match(pieces[-1]) or _JOIN.search(pieces[-1])) if pieces else False
    things = len(pieces) >= (2 if semicolons else 3) and all(re.match(_THING, piece, re.IGNORECASE) for piece in pieces)
    if not (loose or joined or things):
        pieces = pieces[:1]  # commas with no "and" before the last part: an aside, not a list
    return [item for piece in pieces for one in _JOIN.split(piece) if (item := _item(one))]


def _item(text: str) -> str:
    """One deliverable as a product name: its first clause, no marker or leading "and a", capitalized;
    nothing for a pronoun or a count ("it", "three things")."""
    text = _name(re.split(r"(?<=[.!?])\s|:\s", text.strip(), maxsplit=1)[0])
    return "" if text.lower() in _NOT_A_THING or _COUNT.match(text) else text


def _name(text: str) -> str:
    """Words as a product name: no marker, leading "and a" or trailing "too", quotes or end mark; capitalized."""
    text = _LEADING.sub("", _MARKER.sub("", _LEADING.sub("", text.strip())))
    text = _TRAILING.sub("", " ".join(text.split()).rstrip(".!?:;,")).strip("'\"‘’“” ")
    text = text[:NAME_CHARS].strip()
    return text[:1].upper() + text[1:]


# ------------------------------------------------------------------------ a change to the plan


@dataclass(frozen=True)
class PlanChange:
    """What the user's answer to the plan's sign-off changes, by the products' current names."""

    renamed: tuple[tuple[str, str], ...] = ()  # (current name, new name)
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()  # names the words point at that no product has

    def __bool__(self) -> bool:
        return bool(self.renamed or self.added or self.removed)


_QUOTED = r"(?:'(?P<{0}q>[^']+)'|\"(?P<{0}d>[^\"]+)\"|‘(?P<{0}s>[^’]+)’|“(?P<{0}c>[^”]+)”|(?P<{0}>.+?))"
_RENAME = re.compile(r"^(?:please\s+)?(?:rename|retitle|call|change\s+the\s+(?:name|title)\s+of)\s+" + _QUOTED.format("old")
                     + r"\s+(?:to|as|into)\s+" + _QUOTED.format("new") + r"$", re.IGNORECASE)
_CALLED = re.compile(r"^" + _QUOTED.format("old") + r"\s+should\s+be\s+(?:called|named|renamed(?:\s+to)?)\s+"
                     + _QUOTED.format("new") + r"$", re.IGNORECASE)
_REMOVE = re.compile(r"^(?:please\s+)?(?:remove|drop|delete|cut|skip|leave\s+out|take\s+out|get\s+rid\s+of|forget(?:\s+about)?"
                     r"|(?:we|i)\s+(?:do\s+not|don't|no\s+longer)\s+need|no\s+need\s+for)\s+" + _QUOTED.format("old") + r"$",
                     re.IGNORECASE)
_ADD = re.compile(r"^(?:please\s+)?(?:(?:also\s+)?(?:add|include)|also)\s+(?P<new>.+)$|^(?:we|i)\s+(?:also\s+)?(?:need|want)\s+(?P<also>.+?)"
                  r"(?:\s+(?:too|as\s+well))$", re.IGNORECASE)
_CLAUSES = re.compile(r"(?<=[.!?])\s+|\n+|\s*;\s*|(?:,\s*(?:(?:and|then)\s+)?|\s+(?:and|then)\s+)(?=(?:please\s+)?"
                      r"(?:rename|retitle|remove|drop|delete|cut|skip|add|include|leave\s+out|take\s+out|get\s+rid\s+of|"
                      r"forget)\s)", re.IGNORECASE)


def plan_change(words: str, names: tuple[str, ...]) -> PlanChange:
    """The renames, additions and removals ``words`` ask of a plan whose products are ``names``.

    >>> plan_change("Rename 'Three things' to 'On-call policy'. Drop the rota; add a map.", ("Three things", "Rota"))
    PlanChange(renamed=(('Three things', 'On-call policy'),), added=('Map',), removed=('Rota',), unknown=())
    """
    renamed: list[tuple[str, str]] = []
    added: list[str] = []
    removed: list[str] = []
    unknown: list[str] = []

    def known(said: str) -> str | None:
        found = _product_named(said, names)
        if found is None:
            unknown.append(_name(said) or said)
        return found

    for clause in _CLAUSES.split(words.strip()):
        clause = clause.strip().rstrip(".!?").strip()
        if rename := (_RENAME.match(clause) or _CALLED.match(clause)):
            old, new = _quoted(rename, "old"), _name(_quoted(rename, "new"))
            if (current := known(old)) is not None and new:
                renamed.append((current, new))
        elif remove := _REMOVE.match(clause):
            if (current := known(_quoted(remove, "old"))) is not None:
                removed.append(current)
        elif add := _ADD.match(clause):
            added += [name for name in _items(add["new"] or add["also"], loose=False) if _product_named(name, names) is None]
    return PlanChange(tuple(renamed), tuple(dict.fromkeys(added)), tuple(dict.fromkeys(removed)), tuple(unknown))


def _quoted(match: re.Match[str], group: str) -> str:
    return next(value for suffix in ("q", "d", "s", "c", "") if (value := match[group + suffix]) is not None)


def _product_named(said: str, names: tuple[str, ...]) -> str | None:
    """The product ``said`` points at: the same name (no article, any case), else the one name it starts
    (or starts with), else the one name holding all its words, else the closest."""
    wanted = _name(said).casefold()
    if not wanted:
        return None
    folded = {name.casefold(): name for name in names}
    if wanted in folded:
        return folded[wanted]
    words = set(wanted.split())
    for near in ([name for key, name in folded.items() if key.startswith(wanted) or wanted.startswith(key)],
                 [name for key, name in folded.items() if words <= set(key.split())]):
        if len(near) == 1:
            return near[0]
    close = difflib.get_close_matches(wanted, list(folded), n=1, cutoff=0.6)
    return folded[close[0]] if close else None
