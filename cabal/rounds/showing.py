"""What each step's prompt shows, and how much: the one contract every prompt is built from.

A capable model driving a real mission spent 38 % of its calls asking for context that the
prompt had cut or hidden (shared/trials/migration-safety): its own product, the Watchdog's
findings, the directive's done-when, the sources at bootstrap. So the rule is: what a step's
work depends on is shown whole, within bounds generous enough for real documents; only history
past those bounds is left to ``request_context``, and what it returns is whole too.

``ContextBuilder`` (``context.py``) builds every prompt from ``STEP_SHOWS`` and ``BOUNDS``;
``bench/context_bench.py`` checks the prompts of real runs against the same items, from the
graph, so the contract and what a model reads cannot drift apart unnoticed.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from cabal.vocabulary import Step


@dataclass(frozen=True)
class Bounds:
    """Characters (about 4 to a token) past which a text is cut, saying so and how to read the rest."""

    sources_inline: int = 24_000  # every source's text, in all: inline while the total fits
    version: int = 20_000  # one version's content: past it, its head (a real plan ran to 14k)
    text: int = 4_000  # one collab comment, finding, remark, directive field or reflection field
    cited: int = 2_000  # the text one citation names, beside the claims that cite it (a section is at most 2,000)
    requested: int = 60_000  # one part of a request_context answer


BOUNDS = Bounds()


class Shown(StrEnum):
    """One item of what a prompt shows in full (the contract's vocabulary)."""

    SOURCES_TEXT = "sources_text"  # the user's sources, quoted, within BOUNDS.sources_inline (else the list)
    SOURCES_LIST = "sources_list"  # each source's id, name and sections: what to request and cite
    OWN_PRODUCTS = "own_products"  # every product the agent owns, its latest version whole (open ones at Reflect)
    ASSIGNED_PRODUCTS = "assigned_products"  # every product assigned this round, its latest version whole
    DIRECTIVES = "directives"  # each directive whole: objective, done-when, why, context, attachments
    LATEST_INSPECTION = "latest_inspection"  # the verdict on the latest version, every finding whole
    OPEN_COLLABS = "open_collabs"  # every open collab on the product, whole, then this round's and the last's endorsements
    OWN_REFLECTION = "own_reflection"  # the agent's reflection of this round on the product
    VERSIONS_TO_JUDGE = "versions_to_judge"  # each new version whole, with its product's DoD
    PEER_REVIEWS = "peer_reviews"  # the peer reviews of each version to inspect, each with the collabs it wrote, whole
    CITED_EVIDENCE = "cited_evidence"  # beside each version to judge: each citation, its sentences, the text it names
    OWN_EARLIER_FINDINGS = "own_earlier_findings"  # the Watchdog's findings on the product's earlier versions
    REFLECTIONS = "reflections"  # this round's reflections, whole
    VERDICTS = "verdicts"  # verdicts on the versions awaiting a decision, with their findings (and who gave them)
    OPEN_DODS = "open_dods"  # the DoD of every open product, whole
    BLOCKING_COLLABS = "blocking_collabs"  # open collabs of importance 5+ and the user's
    DECISIONS = "decisions"  # this round's acceptances and rejections, with their reasons
    REMARKS = "remarks"  # remarks written to the agent since its previous step, once
    DECISION_RECORD = "decision_record"  # the Chair's record of the mission's decisions: the current ones, with ids
    USER_WORDS = "user_words"  # answers to the Chair's questions, the user's notes, the mission file's answers untaken
    TEAM_CARDS = "team_cards"  # each agent with the name, persona and domain the user's cards give it
    TOOLS = "tools"  # the mission's tools: name, first line, who may call each and in which steps


# The user's words go to every step that writes, judges or decides (a team whose writers never
# saw the user's answer left the ages the user gave blank, and both blind judges held it against
# it); the sources' text to every step that plans, writes or checks work against them (a Chair
# and reviewers given only the list asked for them or worked from memory); the record of
# decisions to every step after Bootstrap (a Chair that pasted agreed periods into three
# directives, and writers who named the roles three ways, left a blind judge inconsistencies).
STEP_SHOWS: dict[Step, tuple[Shown, ...]] = {
    Step.BOOTSTRAP: (Shown.TEAM_CARDS, Shown.TOOLS, Shown.SOURCES_TEXT, Shown.USER_WORDS),
    Step.REFLECT: (Shown.DECISION_RECORD, Shown.OWN_PRODUCTS, Shown.LATEST_INSPECTION, Shown.OPEN_COLLABS,
                   Shown.DIRECTIVES, Shown.SOURCES_TEXT, Shown.REMARKS, Shown.USER_WORDS),
    Step.PLAN: (Shown.DECISION_RECORD, Shown.REFLECTIONS, Shown.VERDICTS, Shown.BLOCKING_COLLABS, Shown.OPEN_DODS,
                Shown.TOOLS, Shown.SOURCES_TEXT, Shown.REMARKS, Shown.USER_WORDS),
    Step.WRITE: (Shown.DECISION_RECORD, Shown.ASSIGNED_PRODUCTS, Shown.DIRECTIVES, Shown.LATEST_INSPECTION,
                 Shown.OPEN_COLLABS, Shown.OWN_REFLECTION, Shown.SOURCES_TEXT, Shown.REMARKS, Shown.USER_WORDS),
    Step.PEER_REVIEW: (Shown.DECISION_RECORD, Shown.VERSIONS_TO_JUDGE, Shown.OWN_PRODUCTS, Shown.SOURCES_TEXT,
                       Shown.REMARKS, Shown.USER_WORDS),
    Step.INSPECT: (Shown.DECISION_RECORD, Shown.VERSIONS_TO_JUDGE, Shown.CITED_EVIDENCE, Shown.PEER_REVIEWS,
                   Shown.OWN_EARLIER_FINDINGS, Shown.SOURCES_TEXT, Shown.REMARKS, Shown.USER_WORDS),
    Step.PRESENTATION: (Shown.DECISION_RECORD, Shown.VERDICTS, Shown.DECISIONS, Shown.REMARKS),
    Step.CLOSE: (Shown.DECISION_RECORD, Shown.REFLECTIONS, Shown.VERDICTS, Shown.VERSIONS_TO_JUDGE, Shown.PEER_REVIEWS,
                 Shown.BLOCKING_COLLABS, Shown.REMARKS, Shown.USER_WORDS),
}
"""Per step, what its prompt carries whole (beyond the charter, the round and the product tree,
which every step but Bootstrap shows)."""


def shows(step: Step, item: Shown) -> bool:
    return item in STEP_SHOWS.get(step, ())


def whole(text: str | None, limit: int, *, rest: str = "") -> str:
    """``text`` as it is (lines kept) up to ``limit`` characters; past it, its head and a line
    that says how much was left out and, with ``rest``, how to read it."""
    text = str(text or "")
    if len(text) <= limit:
        return text
    head = text[:limit].rsplit("\n", 1)[0] if "\n" in text[: limit] else text[:limit]
    note = f"(cut here: {len(text) - len(head):,} more characters" + (f"; {rest})" if rest else ")")
    return head.rstrip() + "\n" + note
