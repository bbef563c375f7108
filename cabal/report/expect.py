"""What a request expects of its mission, and the pure checks of a mission's report against it.

A batch file carries ``expect:`` for every request, and a request may carry its own (its fields
override the batch's). Each field is one expectation; ``cabal eval`` reports the share of runs
that met it. Regular expressions are checked when the file is read, so a bad one is a located
error, not a failed run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cabal.report.model import MissionReport

# A citation of a source in a version's text. The sources of the tools-and-sources issue add the
# kind to cabal.refs; until then the syntax is matched here.
SOURCE_CITATION = re.compile(r"\[\[s:([A-Za-z0-9_.:\-]+)\]\]")


def _compiled(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as error:
        raise ValueError(f"{pattern!r} is not a regular expression: {error}") from None
    return pattern


class JudgeSpec(BaseModel):
    """Rubric questions a model answers about the mission's accepted work, each scored 1 to 5."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(min_length=1, description="any model spec: claude-..., scripted:PATH, py:MODULE:FN, replay:...")
    questions: list[str] = Field(min_length=1, max_length=20, description="the rubric, one question each")
    min_score: int = Field(3, ge=1, le=5, description="a question passes when its score reaches this")


class Expectations(BaseModel):
    """What a mission should achieve; every field is optional."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    state: str | None = Field(None, description="the state it ends in: done, halted, failed...")
    accepted_at_least: int | None = Field(None, ge=0, description="at least this many products accepted")
    products_named: list[str] | None = Field(None, description="regular expressions: each names a live product")
    content_matches: dict[str, str] | None = Field(
        None, description="product name (a regular expression) -> a regular expression its accepted text matches")
    cites_sources: bool | int | None = Field(
        None, description="true: every accepted text cites a source ([[s:ID]]); N: at least N distinct sources "
                          "cited in all")
    max_cost_usd: float | None = Field(None, ge=0)
    max_tokens: int | None = Field(None, ge=0)
    max_rounds: int | None = Field(None, ge=0)
    max_failed_turns: int | None = Field(None, ge=0)
    judge: JudgeSpec | None = None

    @field_validator("products_named")
    @classmethod
    def _patterns(cls, value: list[str] | None) -> list[str] | None:
        return [_compiled(p) for p in value] if value is not None else None

    @field_validator("content_matches")
    @classmethod
    def _content_patterns(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        return {_compiled(k): _compiled(v) for k, v in value.items()} if value is not None else None

    def over(self, base: Expectations | None) -> Expectations:
        """These expectations, with what they leave unset taken from ``base`` (the batch's)."""
        if base is None:
            return self
        return base.model_copy(update=self.model_dump(exclude_unset=True))

    @property
    def empty(self) -> bool:
        return not self.model_dump(exclude_none=True)


@dataclass(frozen=True)
class Check:
    """One expectation checked against one run: its name, whether it held, and what was found."""

    name: str
    passed: bool
    found: str


@dataclass(frozen=True)
class RunFacts:
    """What the checks read of one run beyond its report (the batch's view of it)."""

    state: str
    wall_s: float


def check(expect: Expectations, report: MissionReport | None, facts: RunFacts) -> list[Check]:
    """Every expectation but the judge's, against one run (``report`` None: it never started)."""
    checks: list[Check] = []
    if expect.state is not None:
        checks.append(Check("state", facts.state == expect.state, facts.state))
    if report is None:
        return checks + [Check(name, False, "no mission") for name in _names(expect) if name != "state"]
    total = report.usage.total
    accepted = [p for p in report.live_products if p.status == "accepted"]
    # A container counts as accepted once its children are (report.model.settled_statuses), but
    # has no text of its own: the content checks read the products that were written.
    written = [p for p in accepted if p.accepted_version is not None]
    if expect.accepted_at_least is not None:
        checks.append(Check("accepted_at_least", len(accepted) >= expect.accepted_at_least, str(len(accepted))))
    for pattern in expect.products_named or ():
        named = [p.name for p in report.live_products if re.search(pattern, p.name)]
        checks.append(Check(f"products_named {pattern}", bool(named), ", ".join(named) or "none"))
    for name_pattern, text_pattern in (expect.content_matches or {}).items():
        products = [p for p in written if re.search(name_pattern, p.name)]
        matched = [p.name for p in products if (version := p.accepted_version) is not None
                   and re.search(text_pattern, report.readable(version.content))]
        found = ", ".join(matched) if matched else ("no accepted product named so" if not products else "no match")
        checks.append(Check(f"content_matches {name_pattern}", bool(matched), found))
    if expect.cites_sources is not None:
        texts = [version.content for p in written if (version := p.accepted_version) is not None]
        checks.append(_cites(expect.cites_sources, texts))
    limits = (("max_cost_usd", total.cost_usd, f"${total.cost_usd:.4f}"),
              ("max_tokens", total.input_tokens + total.output_tokens, f"{total.input_tokens + total.output_tokens:,}"),
              ("max_rounds", report.mission.round, str(report.mission.round)),
              ("max_failed_turns", len(report.failed_turns), str(len(report.failed_turns))))
    for name, value, shown in limits:
        limit = getattr(expect, name)
        if limit is not None:
            checks.append(Check(name, value <= limit, shown))
    return checks


def _cites(wanted: bool | int, texts: list[str]) -> Check:
    cited = [set(SOURCE_CITATION.findall(text)) for text in texts]
    if wanted is True:
        uncited = sum(1 for sources in cited if not sources)
        return Check("cites_sources", bool(texts) and not uncited,
                     f"{len(texts) - uncited} of {len(texts)} accepted texts cite a source")
    distinct = set().union(*cited) if cited else set()
    return Check("cites_sources", len(distinct) >= int(wanted), f"{len(distinct)} distinct sources")


def _names(expect: Expectations) -> list[str]:
    """The names the checks of ``expect`` get (what a run that never started fails)."""
    names = [name for name in ("state", "accepted_at_least") if getattr(expect, name) is not None]
    names += [f"products_named {p}" for p in expect.products_named or ()]
    names += [f"content_matches {p}" for p in expect.content_matches or {}]
    names += [name for name in ("cites_sources", "max_cost_usd", "max_tokens", "max_rounds", "max_failed_turns")
              if getattr(expect, name) is not None]
    return names
