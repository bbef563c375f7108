"""Two missions compared (``cabal diff A B``): their products, what each accepted, word by word,
their verdicts, decisions and questions side by side, and what each cost.

Built from two ``MissionReport``s only, so it compares any two missions: a mission and its
replay (no difference in content is the expected answer), the same request run by two team
sizes, before and after a change of prompt. Products are paired by id (the engine's ids are
deterministic, so a replay's match), a pair whose names differ being a rename; what is left is
paired by name; the rest was added or removed.
"""

from __future__ import annotations

import difflib
import re
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from cabal.report.model import Mission, MissionReport, Product

WORDS = re.compile(r"\s+|[^\s]+")
DIFF_FORMAT: Final = "cabal.mission-diff"


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Piece(_Value):
    """A run of words the two texts share (``=``), or that only A (``-``) or only B (``+``) has."""

    op: Literal["=", "-", "+"]
    text: str


class ProductChange(_Value):
    """One product of either mission, paired with its counterpart when it has one."""

    change: Literal["same", "changed", "renamed", "added", "removed"]
    name: str = Field(description="B's name, or A's when B lacks the product")
    a_name: str | None = None
    b_name: str | None = None
    a_status: str | None = None
    b_status: str | None = None
    a_version: int | None = Field(None, description="the version compared: the accepted one, else the latest")
    b_version: int | None = None
    text: tuple[Piece, ...] = Field((), description="A's text to B's, as a word diff")
    a_verdicts: tuple[str, ...] = Field((), description="the Watchdog's verdicts, per version: 'v1 approved'")
    b_verdicts: tuple[str, ...] = ()
    a_decisions: tuple[str, ...] = Field((), description="the Chair's decisions: 'v2 accepted'")
    b_decisions: tuple[str, ...] = ()

    @property
    def text_changed(self) -> bool:
        return any(piece.op != "=" for piece in self.text)


class Figures(_Value):
    """What a mission did and spent."""

    state: str
    stop_reason: str | None = None
    rounds: int
    turns: int
    failed_turns: int
    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    accepted: int


class Halt(_Value):
    """A question the Chair asked (or the mission's end it declared) and the answer it got."""

    round: int
    message: str
    answer: str | None = None


class MissionDiff(_Value):
    """Two missions side by side (``cabal diff --format json``)."""

    format: Literal["cabal.mission-diff"] = DIFF_FORMAT
    a: str = Field(description="mission A's id")
    b: str
    a_name: str
    b_name: str
    lineage: str | None = Field(None, description="how the two are related, when one was forked from the other "
                                                  "or both from one mission")
    products: tuple[ProductChange, ...]
    a_halts: tuple[Halt, ...]
    b_halts: tuple[Halt, ...]
    a_figures: Figures
    b_figures: Figures

    @property
    def same_content(self) -> bool:
        """Whether the two teams produced the same work: products, texts, verdicts, decisions, questions."""
        return all(p.change == "same" for p in self.products) and self.a_halts == self.b_halts

    @property
    def counts(self) -> dict[str, int]:
        found = {change: 0 for change in ("same", "changed", "renamed", "added", "removed")}
        for product in self.products:
            found[product.change] += 1
        return found


def diff_missions(a: MissionReport, b: MissionReport) -> MissionDiff:
    return MissionDiff(a=a.mission.id, b=b.mission.id, a_name=a.mission.name, b_name=b.mission.name,
                       lineage=_lineage(a.mission, b.mission), products=tuple(_pair(a, b)), a_halts=_halts(a), b_halts=_halts(b),
                       a_figures=_figures(a), b_figures=_figures(b))


def _lineage(a: Mission, b: Mission) -> str | None:
    """B forked from A (or A from B) at a round, or both from one mission, in words."""
    if b.forked_from == a.id and b.forked_round:
        return f"B was forked from A at the start of round {b.forked_round}: {_shared(b.forked_round, 'A')}"
    if a.forked_from == b.id and a.forked_round:
        return f"A was forked from B at the start of round {a.forked_round}: {_shared(a.forked_round, 'B')}"
    if a.forked_from and a.forked_from == b.forked_from:
        return (f"both were forked from {a.forked_from}: A at round {a.forked_round}, B at round {b.forked_round}")
    return None


def _shared(forked_round: int, original: str) -> str:
    """What a fork at ``forked_round`` holds of its original, in words: its rounds before that one."""
    if forked_round == 1:
        return f"only the bootstrap is {original}'s"
    if forked_round == 2:
        return f"round 1 is {original}'s"
    return f"rounds 1 to {forked_round - 1} are {original}'s"


def word_diff(old: str, new: str) -> tuple[Piece, ...]:
    """``old`` to ``new`` in runs of whole words (whitespace kept, so the pieces rebuild both)."""
    before, after = WORDS.findall(old), WORDS.findall(new)
    pieces: list[Piece] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes():
        if op == "equal":
            pieces.append(Piece(op="=", text="".join(before[i1:i2])))
            continue
        if i2 > i1:
            pieces.append(Piece(op="-", text="".join(before[i1:i2])))
        if j2 > j1:
            pieces.append(Piece(op="+", text="".join(after[j1:j2])))
    return tuple(pieces)


def _pair(a: MissionReport, b: MissionReport) -> list[ProductChange]:
    b_by_id = {p.id: p for p in b.products}
    paired: list[tuple[Product | None, Product | None]] = []
    left = []
    for product in a.products:
        if product.id in b_by_id:
            paired.append((product, b_by_id.pop(product.id)))
        else:
            left.append(product)
    b_by_name = {p.name.casefold(): p for p in b.products if p.id in b_by_id}
    for product in left:
        match = b_by_name.pop(product.name.casefold(), None)
        if match is not None:
            b_by_id.pop(match.id)
        paired.append((product, match))
    paired += [(None, product) for product in b.products if product.id in b_by_id]
    return [_change(a, b, old, new) for old, new in paired]


def _change(a: MissionReport, b: MissionReport, old: Product | None, new: Product | None) -> ProductChange:
    a_side, b_side = _side(a, old, "a"), _side(b, new, "b")
    if old is None or new is None:
        change = "added" if old is None else "removed"
        present = new or old
        assert present is not None, "a pair holds a product on one side at least"
        return ProductChange(change=change, name=present.name, **a_side, **b_side)
    old_text = a.readable(old.shown.content) if old.shown else ""
    new_text = b.readable(new.shown.content) if new.shown else ""
    pieces = word_diff(old_text, new_text)
    if old.name != new.name:
        change = "renamed"
    elif (any(p.op != "=" for p in pieces) or old.status != new.status
          or (a_side["a_verdicts"], a_side["a_decisions"]) != (b_side["b_verdicts"], b_side["b_decisions"])
          or a_side["a_version"] != b_side["b_version"]):
        change = "changed"
    else:
        change = "same"
    return ProductChange(change=change, name=new.name, text=pieces, **a_side, **b_side)


def _side(report: MissionReport, product: Product | None, prefix: str) -> dict:
    if product is None:
        return {}
    shown = product.shown
    verdicts = tuple(f"v{v.number} {i.verdict}" for v in product.versions for i in v.inspections)
    numbers = {v.id: v.number for v in product.versions}
    decisions = tuple((f"v{numbers[d.version_id]} " if d.version_id in numbers else "")
                      + ("accepted" if d.accepted else f"rejected: {d.reason or 'no reason given'}")
                      for d in product.decisions)
    return {f"{prefix}_name": product.name, f"{prefix}_status": product.status,
            f"{prefix}_version": shown.number if shown else None, f"{prefix}_verdicts": verdicts,
            f"{prefix}_decisions": decisions}


def _halts(report: MissionReport) -> tuple[Halt, ...]:
    return tuple(Halt(round=q.round, message=report.readable(q.message), answer=q.answer) for q in report.questions)


def _figures(report: MissionReport) -> Figures:
    total = report.usage.total
    return Figures(state=report.mission.state, stop_reason=report.mission.stop_reason, rounds=report.mission.round,
                   turns=len(report.turns), failed_turns=len(report.failed_turns),
                   calls=sum(t.calls for t in report.turns), input_tokens=total.input_tokens,
                   output_tokens=total.output_tokens, cost_usd=total.cost_usd,
                   accepted=sum(1 for p in report.live_products if p.status == "accepted"))
