"""The context of one model call: a slice of the graph built for that agent and step.

Small by construction, and laid out for the provider's prompt cache: a prompt is the blocks of
``PROMPT_BLOCKS``, in that order, from the most shared to the least, so that two calls share
the longest start a cache can serve (the house rules in every call; the mission in every call
of a round; the role and step for every agent of the role in the step; the agent from one call
of its turn to the next; then what varies: the round, a minimal product tree, the detail this
step needs and what changed since the agent last acted). Each section has a character budget,
so a prompt stays about the same size at round 20 as at round 2, however long the history
grows. Ids are short and mean the same in every call of a mission (``TempIds``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from enum import StrEnum
from string import Template

from langchain_core.messages import HumanMessage, SystemMessage

from cabal.entities import REQUEST_CONTEXT, STEP_OUTPUTS
from cabal.errors import ConfigError
from cabal.graph import ContextGraph
from cabal.resources import builtin_dir, files_by_name
from cabal.rounds.facts import (Candidate, Decision, Event, FactsDraft, ProductDetail, Reflection, TeamTool,
                                TreeProduct, TurnFacts, UserWord, VersionRef)
from cabal.rounds.facts import Assignment as AssignmentFact
from cabal.rounds.facts import Source as SourceFact
from cabal.rounds.evidence import evidence_block
from cabal.rounds.gates import change_request
from cabal.rounds.ids import TempIds
from cabal.rounds.rules import RuleContext, closing_versions
from cabal.rounds.showing import BOUNDS, Shown, shows, whole
from cabal.rounds.snapshot import Snapshot, charter_map
from cabal.rounds.sources import read_source_text, search_text, source_line
from cabal.rounds.team import Team
from cabal.tools.spec import DEFAULT_MAX_TOOL_CALLS
from cabal.vocabulary import ANSWER_FROM_FILE, CHAIR_ID, ENDORSEMENT, USER_DIRECTION_TYPE, USER_ID, Role, Step
from cabal.yaml_reader import read_text_file

# What each step shows, and the bounds of its texts, is the contract in showing.py; these two
# are the product tree's and a one-line item's.
TREE_LINES = 24
ITEM_CHARS = 400  # one line of the tree, a domain, a title
REQUESTED_CONTEXT = "REQUESTED CONTEXT"  # how the answer to request_context starts
LAST_ROUND = " (the last round: versions written now are accepted or rejected at the closing decisions after Inspect)"


def clip(text: str | None, limit: int) -> str:
    text = " ".join(str(text or "").split()) if limit <= ITEM_CHARS else str(text or "")
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


class Block(StrEnum):
    """One block of a prompt. A new section goes into the block whose sharing it keeps: text
    that is the same for every call of a round into MISSION, anything about this call into CALL."""

    HOUSE = "house"  # how the team works and answers (prompts/system.md): the same in every call
    MISSION = "mission"  # the charter (or the request), the sources, the user's words: every call of the round
    ROLE = "role"  # the role and the step's instructions (prompts/role.md): every agent of the role in the step
    AGENT = "agent"  # who the agent is (prompts/agent.md), its skills, domain and focus
    CALL = "call"  # this call's own part: the round, the product tree, the step's detail, the valid ids


# The order a prompt is sent in: from the most shared to the least, so a provider's prompt cache
# serves every block up to the first that differs. The house block is the system prompt; the
# others are the first user message's blocks (the user's sources and words are data, never
# instructions), and Anthropic gets a cache breakpoint after each but the last (llm/providers/anthropic.py).
PROMPT_BLOCKS: tuple[Block, ...] = (Block.HOUSE, Block.MISSION, Block.ROLE, Block.AGENT, Block.CALL)
_TEMPLATE_FILES = {Block.HOUSE: "system", Block.ROLE: "role", Block.AGENT: "agent"}  # the blocks a template writes


class PromptLibrary:
    """The prompt templates: prompts/system.md, role.md, agent.md and steps/<step>.md (user dirs override)."""

    def __init__(self, extra_dirs: list[Path] | None = None, *, skill_dirs: list[Path] | None = None) -> None:
        dirs = [Path(d) for d in extra_dirs or []]
        self.skill_dirs = [Path(d) for d in skill_dirs or []]
        self._skills: dict[str, str] = {}
        top_level = files_by_name("prompts", (".md",), dirs)
        self.templates = {block: self._read(top_level, name) for block, name in _TEMPLATE_FILES.items()}
        found: dict[str, Path] = {}
        for folder in [builtin_dir("prompts") / "steps", *(d / "steps" for d in dirs)]:  # later wins
            if folder.is_dir():
                found.update({p.stem: p for p in sorted(folder.glob("*.md"))})
        self.steps = {step: self._read(found, step) for step in Step}

    @staticmethod
    def _read(files: dict[str, Path], name: str) -> Template:
        if name not in files:
            raise ConfigError(f"prompt template {name!r} not found",
                              hint="prompts/ must hold system.md, role.md, agent.md and steps/*.md")
        return Template(read_text_file(files[name]))

    def skill_text(self, name: str) -> str:
        """A skill's Markdown (skills/NAME.md, user folders first); unknown names are an error."""
        if name not in self._skills:
            from cabal.skills import load_skill

            self._skills[name] = load_skill(name, self.skill_dirs).text.strip()
        return self._skills[name]

    def system_prompt(self, *, agent_id: str, agent_name: str, role_title: str, persona: str, step: Step,
                      skills: tuple[str, ...] = ()) -> dict[Block, str]:
        """The house block (prompts/system.md), the role's (prompts/role.md) and the agent's own
        (prompts/agent.md, then its skills). Every template takes every placeholder."""
        values = {
            "agent_id": agent_id, "agent_name": agent_name, "role_title": role_title, "persona": persona,
            "step_title": step.heading, "step_instructions": self.steps[step].template.strip(),
            "reasoning_field": _reasoning_field(step),
        }
        blocks = {}
        for block, template in self.templates.items():
            try:
                blocks[block] = template.substitute(values).strip()
            except (KeyError, ValueError) as exc:
                raise ConfigError(f"prompts/{_TEMPLATE_FILES[block]}.md: unknown placeholder {exc}") from None
        # An agent's skills are domain knowledge it brings to every step: part of its own block,
        # not of the per-call context.
        blocks[Block.AGENT] += "".join(f"\n\nYour skill, {name}:\n\n{self.skill_text(name)}" for name in skills)
        return blocks


@dataclass
class Prompt:
    blocks: dict[Block, str]  # each block's text (empty: not in this prompt), sent in PROMPT_BLOCKS' order
    ids: TempIds = field(default_factory=TempIds)
    facts: TurnFacts | None = None  # the same turn as data, for fake models
    offered: frozenset[str] = frozenset()  # envelopes offered beyond the step's own (request_context at a bootstrap
    #                                         whose sources do not fit inline)

    def text(self, block: Block) -> str:
        return self.blocks.get(block, "")

    @property
    def user(self) -> str:
        """What the model reads after the system prompt, as one text (tests and transcripts read it)."""
        return "\n\n".join(self.text(block) for block in PROMPT_BLOCKS[1:] if self.text(block))

    def system_message(self) -> SystemMessage:
        """The house block: the one system prompt, the same in every call."""
        return SystemMessage([{"type": "text", "text": self.text(Block.HOUSE)}])

    def first_message(self) -> HumanMessage:
        """The other blocks, in order, each its own content block, so a provider can cache the
        prefix up to the end of each (``llm/providers/anthropic.py``)."""
        return HumanMessage([{"type": "text", "text": self.text(block)} for block in PROMPT_BLOCKS[1:]
                             if self.text(block)])


class ContextBuilder:
    """Builds the prompt of one agent's turn in one step, as ``showing.STEP_SHOWS`` says.

    Every stored text goes through ``ids.text_to_model`` on its way into a prompt, so its
    references name the short ids this prompt lists (and never a graph id)."""

    def __init__(self, graph: ContextGraph, snapshot: Snapshot, team: Team, prompts: PromptLibrary,
                 tools: Sequence[TeamTool] = (), tool_calls_per_turn: int = DEFAULT_MAX_TOOL_CALLS) -> None:
        self.graph = graph
        self.snapshot = snapshot
        self.team = team
        self.prompts = prompts
        self.tools = tuple(tools)  # the mission's tools (``tooluse.team_tools``), listed for the Chair
        # A Chair that did not know the limit asked for 14 calls in one directive; the writer ran
        # out at 5 and the product had no version that round.
        self.tool_calls_per_turn = tool_calls_per_turn

    # ------------------------------------------------------------------------------ api

    @property
    def _watchdogs(self) -> list[str]:
        return self.team.ids(Role.WATCHDOG)

    def _last_round(self) -> bool:
        limit = self.snapshot.mission.get("rounds")
        return bool(limit) and self.snapshot.round >= int(limit or 0)

    def build(self, agent_id: str, step: Step, *, extra: list[str] | None = None) -> Prompt:
        agent = self.team.get(agent_id)
        assert agent is not None, f"{agent_id} takes a turn, so is on the team"
        card = self.team.cards[agent.role]
        # The Chair writes personas and domains at bootstrap (and may change them later): they
        # replace the role card's persona (never one the user's card gives) and tell each
        # operative what it is responsible for.
        persona = self.team.persona(agent_id, charter_map(self.snapshot.mission, "personas")) or card.persona
        blocks = self.prompts.system_prompt(agent_id=agent_id, agent_name=agent.name, role_title=card.title,
                                            persona=str(persona), step=step, skills=agent.skills)
        # Last in the agent's block: what sets it apart from the other agents of its role.
        blocks[Block.AGENT] = "\n\n".join(part for part in (blocks[Block.AGENT], self._domain(agent_id)) if part)
        if agent.focus:  # several watchdogs share the inspection: each knows its part
            blocks[Block.AGENT] += (f"\n\nYour focus: {', '.join(agent.focus)} findings only; "
                                    "the team's other watchdogs inspect the rest.")
        ids = TempIds(agents=frozenset(self.team.ids()), mission=self.snapshot.short_ids(),
                      sources={s["source_id"]: s for s in self.snapshot.current_sources()},
                      tool_calls=set(self.snapshot.tool_calls))
        self._agent = agent_id
        self._facts = FactsDraft()
        self._offered: set[str] = set()
        blocks[Block.MISSION] = self._mission(step, ids)
        limit = self.snapshot.mission.get("rounds")
        sections = [f"# Round {self.snapshot.round}" + (f" of {limit}" if limit else "")
                    + (LAST_ROUND if self._last_round() else "")]
        if step != Step.BOOTSTRAP:
            sections.append(self._tree(agent_id, step, ids))
        detail = getattr(self, f"_detail_{step}")(agent_id, ids)
        sections += [s for s in detail if s]
        sections.append(self._since_last_turn(agent_id, step, ids))
        sections.append(self._remarks(agent_id, step, ids))
        sections += extra or []
        sections.append(f"## Valid ids\n{ids.summary()} · users u:all, u:user (new products: new-1, new-2, ...)"
                        if step == Step.PLAN else f"## Valid ids\n{ids.summary()}")
        facts = self._facts.freeze(round=self.snapshot.round, step=step, agent=agent_id,
                                   request=str(self.snapshot.mission.get("request") or ""),
                                   team=tuple((a.id, a.role) for a in self.team.agents), focus=agent.focus)
        blocks[Block.CALL] = "\n\n".join(s for s in sections if s).strip()
        return Prompt(blocks=blocks, ids=ids, facts=facts, offered=frozenset(self._offered))

    # ---------------------------------------------------------------------------- sections

    def _mission(self, step: Step, ids: TempIds) -> str:
        """The mission block: the charter (or the request), then the user's sources and words
        where the step shows them, then the Chair's record of decisions (it changes at a Plan,
        the rest hardly ever: the most stable first). The same for every call of a round that
        shows them."""
        parts = [self._charter(ids)]
        if shows(step, Shown.SOURCES_TEXT):
            parts.append(self._sources_text(ids))
        if shows(step, Shown.USER_WORDS):
            parts.append(self._answered_halts())
        if shows(step, Shown.DECISION_RECORD):
            parts.append(self._decisions(ids))
        return "\n\n".join(part for part in parts if part)

    def _charter(self, ids: TempIds) -> str:
        mission = self.snapshot.mission
        lines = []
        if mission.get("charter"):
            lines += ["## Mission", self._text(mission["charter"], ids)]
            for title, key in (("Objectives", "objectives"), ("Constraints", "constraints")):
                items = mission.get(key) or []
                if items:
                    lines += [f"## {title}", *[f"- {self._text(item, ids)}" for item in items]]
        else:
            lines += ["## The user's request", whole(mission.get("request"), BOUNDS.text * 2)]
        return "\n".join(lines).replace("\n## ", "\n\n## ")  # a blank line before each section

    def _domain(self, agent_id: str) -> str:
        """The agent's domain: the Chair's, else its card's (until the Chair gives one)."""
        domain = charter_map(self.snapshot.mission, "domains").get(agent_id)
        agent = self.team.get(agent_id)
        if not domain and agent is not None and agent.domain:  # the card's, until the Chair gives one
            domain = {"responsibility": agent.domain}
        if not isinstance(domain, dict) or not domain.get("responsibility"):
            return ""
        return (f"Your domain: {clip(domain['responsibility'], ITEM_CHARS)}"
                + (f" (area: {clip(domain.get('area'), 80)})" if domain.get("area") else ""))

    def _decisions(self, ids: TempIds) -> str:
        """The Chair's record of the mission's decisions, the current ones whole, by their ids."""
        current = self.snapshot.current_decisions()
        self._facts.decisions += [Decision(d["key"], str(d.get("topic")), str(d.get("decision"))) for d in current]
        return self._section("Decisions (the Chair's record: every product keeps to them)", [
            f"- {d['key']} {clip(ids.text_to_model(str(d.get('topic') or '')), ITEM_CHARS)}: "
            f"{self._text(d.get('decision'), ids)}" for d in current])

    def _tree_line(self, product: dict, ids: TempIds, depth: int) -> str:
        latest = self.snapshot.latest_version(product["id"])
        open_count = len(self.snapshot.open_collabs(product["id"]))
        parts = [f"{ids.short('p', product['id'])} [{product['type']}] {clip(product['name'], 80)}",
                 f"owner {product.get('owner') or '-'}", product.get("status", "open"),
                 f"version {latest['number']}" if latest else "no version"]
        if open_count:
            parts.append(f"{open_count} open collab(s)")
        return "  " * depth + " · ".join(parts)

    def _tree(self, agent_id: str, step: str, ids: TempIds) -> str:
        """The product tree in minimal form; beyond the line budget, quiet products collapse."""
        live = self.snapshot.live_products()
        relevant = self._relevant_products(agent_id, step)
        ordered: list[tuple[dict, int]] = []
        children: dict[str | None, list[dict]] = {}
        for product in sorted(live, key=lambda p: p["id"]):
            children.setdefault(product.get("parent_id"), []).append(product)

        def walk(parent: str | None, depth: int) -> None:
            for product in children.get(parent, []):
                ordered.append((product, depth))
                walk(product["id"], depth + 1)

        walk(None, 0)
        shown = ordered
        hidden: list[dict] = []
        if len(ordered) > TREE_LINES:
            # Keep what this turn is about, then open products, then the rest, in tree order.
            rank = {p["id"]: (0 if p["id"] in relevant else 1 if p.get("status") == "open" else 2) for p, _ in ordered}
            keep = {p["id"] for p, _ in sorted(ordered, key=lambda pd: rank[pd[0]["id"]])[:TREE_LINES]}
            shown = [(p, d) for p, d in ordered if p["id"] in keep]
            hidden = [p for p, _ in ordered if p["id"] not in keep]
        lines = ["## Product tree"] + [self._tree_line(p, ids, d) for p, d in shown]
        for product, depth in shown:
            latest = self.snapshot.latest_version(product["id"])
            self._facts.tree.append(TreeProduct(ids.short("p", product["id"]), product["name"], product["type"],
                                                product.get("owner"), product.get("status", "open"),
                                                latest["number"] if latest else None, depth))
        if hidden:
            by_status: dict[str, int] = {}
            for product in hidden:
                by_status[product.get("status", "open")] = by_status.get(product.get("status", "open"), 0) + 1
            lines.append(f"(+ {len(hidden)} more: " + ", ".join(f"{n} {s}" for s, n in sorted(by_status.items())) + ")")
        return "\n".join(lines)

    def _relevant_products(self, agent_id: str, step: str) -> set[str]:
        snapshot = self.snapshot
        relevant = {p["id"] for p in snapshot.owned_by(agent_id) if p.get("status") == "open"}
        relevant |= {a["product_id"] for a in snapshot.active_assignments(agent_id)}
        if step in (Step.PEER_REVIEW, Step.INSPECT, Step.PLAN, Step.CLOSE, Step.PRESENTATION):
            relevant |= {v["product_id"] for v in snapshot.new_versions()}
        return relevant

    # ------------------------------------------------------------------- texts, whole

    @staticmethod
    def _text(text: object, ids: TempIds, limit: int = BOUNDS.text, *, rest: str = "") -> str:
        """A stored text as this call shows it: its references in this call's short ids, whole up to ``limit``."""
        return whole(ids.text_to_model(str(text or "")), limit, rest=rest)

    @staticmethod
    def _version_ref(version: dict, ids: TempIds) -> VersionRef:
        return VersionRef(ids.short("v", version["id"]), ids.short("p", version["product_id"]), version["number"],
                          version.get("author"))

    @staticmethod
    def _version_name(version: dict, ids: TempIds) -> str:
        """One version: its id (its product's id and its number, both usable) and who wrote it when."""
        return f"{_version_id(version, ids)} (by {version.get('author')} in round {version.get('round')})"

    def _version_block(self, version: dict, ids: TempIds, *, content: str | None) -> str:
        lines = [f"{self._version_name(version, ids)}: {clip(ids.text_to_model(str(version.get('title') or '')), 200)}",
                 f"Change summary: {self._text(version.get('change_summary'), ids)}"]
        if content is not None:  # between fences: a version's own headings are not the prompt's
            lines += ["Content (between the ~~~ lines):", "~~~",
                      self._text(content.rstrip(), ids, BOUNDS.version,
                                 rest=f"request full_content of {ids.short('p', version['product_id'])} to read all of it"),
                      "~~~"]
        return "\n".join(lines)

    def _contents(self, versions: list[dict]) -> dict[str, str]:
        return self.snapshot.contents([v["id"] for v in versions], self._read_contents)

    def _read_contents(self, version_ids: list[str]) -> dict[str, str]:
        return {v["id"]: v.get("content", "") for v in self.graph.get_many(version_ids)}

    def _collab_line(self, collab: dict, ids: TempIds, *, limit: int = BOUNDS.text) -> str:
        # A user's note may target no product (type user_independent).
        target = ids.short("p", collab["product_id"]) if collab.get("product_id") else "the mission"
        about = f" about {ids.short('v', collab['version_id'])}" if collab.get("version_id") else ""
        return (f"{ids.short('c', collab['id'])} on {target}{about} "
                f"[{collab['type']}, importance {collab.get('importance')}] by {collab.get('author')} "
                f"(round {collab.get('round')}): {self._text(collab.get('comment'), ids, limit)}")

    def _inspector(self, inspection: dict) -> str:
        """Who gave an inspection, and the findings it covers when the Watchdog has a focus."""
        author = str(inspection.get("author"))
        agent = self.team.get(author)
        return author + (f" (focus: {', '.join(agent.focus)})" if agent and agent.focus else "")

    def _inspection_lines(self, inspection: dict, ids: TempIds, *, by: bool = True) -> list[str]:
        """An inspection's verdict and every finding, whole: what the owner must answer."""
        who = f" by {self._inspector(inspection)}" if by else ""
        version = self.snapshot.version(str(inspection.get("version_id")))
        name = _version_id(version, ids) if version else "a version"
        lines = [f"Inspection of {name}{who}, round {inspection.get('round')}: {inspection['assessment']}"]
        for finding in self.snapshot.findings_of(inspection["id"]):
            lines.append(f"- [{finding['category']}, severity {finding['severity']}] "
                         f"{self._text(finding.get('issue'), ids)}")
            if finding.get("recommendation"):
                lines.append(f"  Recommendation: {self._text(finding.get('recommendation'), ids)}")
            if finding.get("dod_criterion"):
                lines.append(f"  DoD criterion: {self._text(finding.get('dod_criterion'), ids)}")
        if len(lines) == 1:
            lines.append("- no findings")
        return lines

    def _product_fact(self, product: dict, ids: TempIds) -> ProductDetail:
        """The facts ``_product_detail`` shows: its latest version, the verdict, the open feedback."""
        latest = self.snapshot.latest_version(product["id"])
        verdict = self.snapshot.verdict_of(latest["id"], self._watchdogs) if latest else None
        return ProductDetail(
            ids.short("p", product["id"]), product["name"], product["type"], str(product.get("dod") or ""),
            VersionRef(ids.short("v", latest["id"]), ids.short("p", product["id"]), latest["number"],
                       latest.get("author")) if latest else None,
            verdict,
            tuple(ids.short("c", c["id"]) for c in self.snapshot.open_collabs(product["id"])),
        )

    def _product_detail(self, product: dict, ids: TempIds, *, with_content: bool = True,
                        with_feedback: bool = True) -> str:
        """A product the agent works on: its DoD, its latest version whole, the latest
        inspection with every finding, and every open collab on it, whole."""
        snapshot = self.snapshot
        lines = [f"### {ids.short('p', product['id'])} {product['name']} [{product['type']}] · "
                 f"owner {product.get('owner') or '-'} · {product.get('status', 'open')}",
                 f"DoD: {self._text(product.get('dod'), ids)}"]
        latest = snapshot.latest_version(product["id"])
        if latest is None:
            lines.append("No version yet.")
        else:
            content = self._contents([latest]).get(latest["id"], "") if with_content else None
            lines.append("Latest version: " + self._version_block(latest, ids, content=content))
            inspections = snapshot.inspections_of(latest["id"], self._watchdogs)
            for inspection in inspections:
                lines += self._inspection_lines(inspection, ids, by=True)
            if not inspections:
                lines.append("Not inspected yet.")
        if with_feedback:
            feedback = snapshot.open_collabs(product["id"])
            lines.append("Open collabs on it:" if feedback else "No open collabs on it.")
            lines += [f"- {self._collab_line(c, ids)}" for c in feedback]
            praise = snapshot.endorsements(product["id"])
            if praise:
                lines.append("Endorsements of it (keep what they praise; no answer needed):")
                lines += [f"- {self._collab_line(c, ids)}" for c in praise]
        return "\n".join(lines)

    def _section(self, title: str, blocks: list[str]) -> str:
        """A titled section of whole blocks (each text in it is already within its bound)."""
        if not blocks:
            return ""
        return "\n".join([f"## {title}", *blocks])

    # ----------------------------------------------------------------------- sources

    def _sources_list(self) -> str:
        """The user's sources, one line each: what to request (need source, search_sources) and cite."""
        sources = self.snapshot.current_sources()
        if not sources:
            return ""
        self._note_sources(sources)
        lines = [source_line(s) for s in sources]
        return self._section("The user's sources (read them with request_context: need source with sourceId s1 or "
                             "a section s1#2, or need search_sources with a query; cite them as [[s:s1]] or "
                             "[[s:s1#2]])", lines)

    def _note_sources(self, sources: list[dict]) -> None:
        known = {s.id for s in self._facts.sources}
        self._facts.sources += [SourceFact(s["source_id"], str(s["name"]), str(s.get("note") or ""),
                                           int(s.get("chunk_count") or 0), str(s.get("first_heading") or ""))
                                for s in sources if s["source_id"] not in known]

    def _sources_text(self, ids: TempIds) -> str:
        """The user's sources themselves, quoted section by section with the id to cite, while
        they fit ``BOUNDS.sources_inline`` in all; past it, the list, and request_context offered."""
        sources = self.snapshot.current_sources()
        if not sources:
            return ""
        if sum(int(s.get("size") or 0) for s in sources) > BOUNDS.sources_inline:
            self._offered.add(REQUEST_CONTEXT)
            return self._sources_list()
        self._note_sources(sources)
        blocks = []
        for source in sources:
            # A source version never changes: its text is read once for the whole run.
            text = self.snapshot.source_texts.get(source["id"])
            if text is None:
                text = self.snapshot.source_texts[source["id"]] = read_source_text(
                    self.graph, source["source_id"], ids.sources, BOUNDS.sources_inline)
            blocks.append(f"### {text}")
        return self._section("The user's sources, whole (cite them as [[s:s1]] or a section as [[s:s1#2]])", blocks)

    # ---------------------------------------------------------------- per-step detail

    def _detail_bootstrap(self, agent_id: str, ids: TempIds) -> list[str]:
        return [self._team_section(), self._tools_section()]
    def _team_section(self) -> str:
        """The team, with what the user's cards already say of each agent, and what the Chair writes."""
        lines = []
        for agent in self.team.agents:
            given = [f"named {agent.name}"] if agent.name != agent.id else []
            given += [f"persona: {clip(agent.persona, ITEM_CHARS)}"] if agent.persona else []
            given += [f"domain: {clip(agent.domain, ITEM_CHARS)}"] if agent.domain else []
            lines.append(f"- {agent.id} ({agent.role})" + (f", from the user's card: {'; '.join(given)}" if given else ""))
        to_write = self.team.to_write()
        self._facts.given_personas += [a.id for a in self.team.agents if a.id not in to_write]
        if len(to_write) < len(self.team.agents):
            lines.append("Names and personas from the user's cards stay as given: write personas only for "
                         + (", ".join(to_write) or "none") + "; a domain for every operative, within its card's.")
        return self._section("The team", lines)

    def _tools_section(self) -> str:
        """The mission's tools: what each does and who may call it when, so a directive can name one."""
        self._facts.tools += self.tools
        return self._section("The team's tools (a directive may tell an agent to use one; an agent makes at most "
                             f"{self.tool_calls_per_turn} tool calls in one turn, one call a reply)", [
            f"- {tool.name}, for {', '.join(tool.callers) or 'no one'} at {', '.join(s.heading for s in tool.steps)}: "
            f"{clip(tool.description, ITEM_CHARS)}" for tool in self.tools])

    def _directive(self, assignment: dict, ids: TempIds) -> str:
        """A directive whole: objective, done-when, why, context, and what the Chair attached."""
        lines = [f"Directive to {assignment.get('assignee')} (importance {assignment.get('importance')}, "
                 f"round {assignment.get('round')}):",
                 f"Objective: {self._text(assignment.get('objective'), ids)}",
                 f"Done when: {self._text(assignment.get('dod'), ids)}",
                 f"Why: {self._text(assignment.get('why'), ids)}"]
        if assignment.get("context"):
            lines.append(f"Context: {self._text(assignment['context'], ids)}")
        for attached in json.loads(assignment.get("attached") or "[]"):
            other = self.snapshot.products.get(attached.get("productId"))
            if other:
                lines.append(f"Attached: {ids.short('p', other['id'])} {other['name']} "
                             f"({', '.join(attached.get('include') or [])})"
                             + (f": {self._text(attached.get('reason'), ids)}" if attached.get("reason") else ""))
        return "\n".join(lines)

    def _attached_details(self, assignment: dict, ids: TempIds, shown: set[str]) -> list[str]:
        """The products the Chair attached to a directive, each once in the prompt (``shown``:
        the products already shown whole above)."""
        blocks = []
        for attached in json.loads(assignment.get("attached") or "[]"):
            other = self.snapshot.products.get(attached.get("productId"))
            if other and other["id"] in shown:
                blocks.append(f"Attached {ids.short('p', other['id'])} {other['name']}: shown above.")
            elif other:
                shown.add(other["id"])
                include = attached.get("include") or []
                blocks.append("Attached " + self._product_detail(other, ids, with_content="content" in include,
                                                                 with_feedback="feedback" in include).lstrip("#").lstrip())
        return blocks

    def _detail_reflect(self, agent_id: str, ids: TempIds) -> list[str]:
        mine = [p for p in self.snapshot.owned_by(agent_id) if p.get("status") == "open"]
        directives = {a["product_id"]: a for a in self.snapshot.active_assignments(agent_id)}
        owned = []
        for product in mine:
            block = self._product_detail(product, ids)
            if product["id"] in directives:
                block += "\nThe directive you are working to:\n" + self._directive(directives[product["id"]], ids)
            owned.append(block)
        self._facts.products += [self._product_fact(p, ids) for p in mine]
        return [self._section("Your products", owned)]

    def _reflection_block(self, reflection: dict, ids: TempIds, *, who: bool = True) -> str:
        """A reflection whole: the DoD status and gaps, the answers to feedback, the next version's plan."""
        product = self.snapshot.products.get(reflection["product_id"], {})
        lines = [(f"{reflection.get('author')} on " if who else "On ")
                 + f"{ids.short('p', reflection['product_id'])} {product.get('name')}: DoD {reflection['dod_status']}"]
        gaps = _as_list(reflection.get("dod_gaps"))
        if gaps:
            lines.append("Gaps: " + "; ".join(self._text(g, ids) for g in gaps))
        for response in _as_list(reflection.get("responses")):
            if isinstance(response, dict) and response.get("collabId"):
                lines.append(f"Answer to {ids.short('c', str(response['collabId']))}: {response.get('action')}: "
                             f"{self._text(response.get('rationale'), ids)}"
                             + (f" (planned: {self._text(response.get('plannedChange'), ids)})"
                                if response.get("plannedChange") else ""))
        lines.append(f"Next version: {self._text(reflection.get('next_version_delta'), ids)}")
        blockers = _as_list(reflection.get("blockers"))
        if blockers:
            lines.append("Blockers: " + "; ".join(self._text(b, ids) for b in blockers))
        return "\n".join(lines)

    def _detail_plan(self, agent_id: str, ids: TempIds, *, deciding: set[str] | None = None) -> list[str]:
        """``deciding``: the products whose versions await a decision (default: every open one)."""
        snapshot = self.snapshot
        reflections = [self._reflection_block(r, ids) for r in snapshot.reflections_in()]
        self._facts.reflections += [Reflection(r.get("author"), ids.short("p", r["product_id"]), r["dod_status"])
                                    for r in snapshot.reflections_in()]
        return [
            self._plan_changes(),
            self._direction(),
            self._section("Reflections this round", ["- " + block.replace("\n", "\n  ") for block in reflections]),
            self._awaiting_decision(ids, deciding),
            self._section("Open feedback (importance 5+ and from the user)", [
                f"- {self._collab_line(c, ids)}" for c in snapshot.open_collabs()
                if int(c.get("importance", 0)) >= 5 or c.get("author") == USER_ID]),
            self._section("Open products' definitions of done", [
                f"- {ids.short('p', p['id'])} {p['name']}: {self._text(p.get('dod'), ids)}"
                for p in snapshot.live_products() if p.get("status") == "open"]),
            self._section("Active assignments", [
                f"- {ids.short('p', a['product_id'])} → {a['assignee']} (since round {a['round']})"
                for a in snapshot.active_assignments()]),
            "## Operatives\n" + "\n".join(f"- {a.id}: {len(snapshot.owned_by(a.id))} product(s)"
                                          for a in self.team.agents if a.role == Role.OPERATIVE),
            self._tools_section(),
        ]

    def _awaiting_decision(self, ids: TempIds, deciding: set[str] | None = None) -> str:
        """Each open product's latest version (of ``deciding`` only, if given), with its verdict and
        every finding, for the Chair's decision."""
        snapshot = self.snapshot
        blocks = []
        for product in snapshot.live_products():
            latest = snapshot.latest_version(product["id"])
            if product.get("status") != "open" or not latest or (deciding is not None and product["id"] not in deciding):
                continue
            verdict = snapshot.verdict_of(latest["id"], self._watchdogs) or "not inspected"
            blocking = len(snapshot.blocking_collabs(product["id"]))
            candidate = Candidate(ids.short("p", product["id"]), product["name"], ids.short("v", latest["id"]),
                                  latest["number"], verdict, blocking)
            self._facts.candidates.append(candidate)
            reported = [r["dod_status"] for r in snapshot.reflections_in() if r["product_id"] == product["id"]
                        and r.get("author") == product.get("owner")]
            report = ("none on it: it was written this round" if latest.get("round") == snapshot.round
                      else reported[-1] if reported else "none")
            lines = [f"### {candidate.product} {product['name']}: latest version {self._version_name(latest, ids)}",
                     f"Verdict: {verdict}" + (f"; {blocking} blocking collab(s) open" if blocking else "")
                     + f"; owner's DoD report this round: {report}"]
            for inspection in snapshot.inspections_of(latest["id"], self._watchdogs):
                lines += self._inspection_lines(inspection, ids)[1:]
            blocks.append("\n".join(lines))
        return self._section("Versions awaiting a decision (to accept one, give its version id)", blocks)

    def _detail_write(self, agent_id: str, ids: TempIds) -> list[str]:
        blocks = []
        own = {r["product_id"]: r for r in self.snapshot.reflections_in() if r.get("author") == agent_id}
        mine = [a for a in self.snapshot.assignments_in() if a.get("assignee") == agent_id
                and a["product_id"] in self.snapshot.products]
        shown = {a["product_id"] for a in mine}  # each product whole once: an attached one may be assigned too
        for assignment in mine:
            product = self.snapshot.products[assignment["product_id"]]
            block = [self._product_detail(product, ids), self._directive(assignment, ids)]
            if product["id"] in own:
                block.append("Your reflection this round:\n" + self._reflection_block(own[product["id"]], ids, who=False))
            block += self._attached_details(assignment, ids, shown)
            blocks.append("\n".join(block))
            self._facts.assignments.append(AssignmentFact(self._product_fact(product, ids),
                                                          str(assignment.get("objective") or ""),
                                                          assignment.get("importance"),
                                                          ids.text_to_model(assignment.get("context") or "")))
        return [self._section("Your assignments this round", blocks)]

    def _detail_peer_review(self, agent_id: str, ids: TempIds) -> list[str]:
        versions = [v for v in self.snapshot.new_versions()
                    if self.snapshot.products.get(v["product_id"], {}).get("owner") != agent_id and v.get("author") != agent_id]
        contents = self._contents(versions)
        blocks = [self._judged_block(v, contents, ids) for v in versions]
        self._facts.new_versions += [self._version_ref(v, ids) for v in versions]
        # A reviewer judges from its own domain: its own products, whole, are what it checks the
        # new versions against (a capable model asked for them in every review otherwise).
        judged = {v["product_id"] for v in versions}
        mine = [self._product_detail(p, ids, with_feedback=False) for p in self.snapshot.owned_by(agent_id)
                if p["id"] not in judged and self.snapshot.latest_version(p["id"])]
        return [self._section("New versions to review", blocks),
                self._section("Your own products, for consistency (not to review)", mine)]

    def _judged_block(self, version: dict, contents: dict[str, str], ids: TempIds) -> str:
        product = self.snapshot.products[version["product_id"]]
        return (f"### {ids.short('p', product['id'])} {product['name']} [{product['type']}]\n"
                f"DoD: {self._text(product.get('dod'), ids)}\n"
                + self._version_block(version, ids, content=contents.get(version["id"], "")))

    def _review_lines(self, review: dict, ids: TempIds) -> list[str]:
        """A peer review, then each collab its author wrote with it, whole: the summary may point at them."""
        return ([f"- {review.get('author')}: {review['assessment']}: {self._text(review.get('summary'), ids)}"]
                + [f"  - {self._collab_line(c, ids)}" for c in self.snapshot.collabs_of_review(review)])

    def _detail_inspect(self, agent_id: str, ids: TempIds) -> list[str]:
        versions = self.snapshot.new_versions()
        contents = self._contents(versions)
        blocks = []
        for version in versions:
            block = [self._judged_block(version, contents, ids)]
            evidence = evidence_block(self.graph, contents.get(version["id"], ""), ids.text_to_model)
            block += [evidence] if evidence else []
            reviews = [line for r in self.snapshot.reviews_of(version["id"]) for line in self._review_lines(r, ids)]
            if reviews:
                block += ["Peer reviews:", *reviews]
            earlier = [i for v in self.snapshot.versions_of(version["product_id"]) if v["id"] != version["id"]
                       for i in self.snapshot.inspections if i.get("version_id") == v["id"] and i.get("author") == agent_id]
            if earlier:
                block.append("Your earlier inspections of this product (check that they were answered):")
                for inspection in earlier:
                    block += self._inspection_lines(inspection, ids, by=False)
            blocks.append("\n".join(block))
        self._facts.new_versions += [self._version_ref(v, ids) for v in versions]
        return [self._section("New versions to inspect", blocks)]

    def _detail_presentation(self, agent_id: str, ids: TempIds) -> list[str]:
        events = self._round_events(ids)
        self._facts.events += events
        self._facts.speakers += self.team.speakers(agent_id)
        why = []
        for version in self.snapshot.new_versions():
            for inspection in self.snapshot.inspections_of(version["id"], self._watchdogs):
                findings = self.snapshot.findings_of(inspection["id"])
                name = self.snapshot.products[version["product_id"]]["name"]
                why.append(f"- {name}, version {version['number']}: {inspection['assessment']} by "
                           f"{self._inspector(inspection)}" + ("" if findings else " (no findings)"))
                why += [f"  - [{f['category']}, severity {f['severity']}] {self._text(f.get('issue'), ids)}"
                        for f in findings]
        return [self._section("What happened this round", [e.text for e in events] or ["- nothing was written this round"]),
                self._section("Why: each Watchdog's verdict and findings", why),
                f"You may speak as: {', '.join(self.team.speakers(agent_id))}."]

    def _detail_close(self, agent_id: str, ids: TempIds) -> list[str]:
        """The closing decisions after Inspect: the Plan's picture of the versions awaiting them
        (``rules.closing_versions``), with verdicts and findings (its facts too), then each of
        those versions whole, with its DoD and peer reviews: no reflection speaks for it, so the
        Chair judges it."""
        last = self._last_round()
        versions = closing_versions(RuleContext(self.snapshot, self.team, agent_id), last_round=last)
        # The last round's decisions are the last of all: every open product's latest version awaits them.
        deciding = None if last else {v["product_id"] for v in versions}
        plan = [s for s in self._detail_plan(agent_id, ids, deciding=deciding)
                if s.startswith(("## Reflections this round", "## Versions awaiting a decision", "## Open feedback"))]
        self._facts.tools.clear()  # the Plan's list of tools is left out: no work is assigned now
        contents = self._contents(versions)
        blocks = []
        for version in versions:
            block = [self._judged_block(version, contents, ids)]
            # Its verdict and findings are above, with the versions awaiting a decision.
            reviews = [line for r in self.snapshot.reviews_of(version["id"]) for line in self._review_lines(r, ids)]
            if reviews:
                block += ["Peer reviews:", *reviews]
            blocks.append("\n".join(block))
        self._facts.new_versions += [self._version_ref(v, ids) for v in versions]
        return [*plan, self._section("Versions written this round", blocks)]

    def _round_events(self, ids: TempIds) -> list[Event]:
        """What happened this round, one line each: assignments, versions, decisions with their
        reasons, remarks to the user, questions asked."""
        snapshot = self.snapshot
        events = []
        for assignment in snapshot.assignments_in():
            name = snapshot.products.get(assignment["product_id"], {}).get("name")
            events.append(Event(CHAIR_ID, "assigned", name, f"- {CHAIR_ID} assigned {name} to {assignment['assignee']}: "
                                                            f"{self._text(assignment.get('objective'), ids)}"))
        for version in snapshot.new_versions():
            verdict = snapshot.verdict_of(version["id"], self._watchdogs)
            name = snapshot.products[version["product_id"]]["name"]
            events.append(Event(version.get("author"), "wrote", name,
                                f"- {version.get('author')} wrote version {version['number']} of {name}: "
                                f"{self._text(version.get('change_summary'), ids)}"
                                + (f" (inspection: {verdict})" if verdict else "")))
        for acceptance in snapshot.acceptances:
            if acceptance.get("round") == snapshot.round:
                name = snapshot.products.get(acceptance["product_id"], {}).get("name")
                verb = "accepted" if acceptance["accepted"] else "rejected"
                events.append(Event(CHAIR_ID, verb, name, f"- {CHAIR_ID} {verb} {name}"
                                    + (f": {self._text(acceptance.get('rejection_reason'), ids)}"
                                       if acceptance.get("rejection_reason") else "")))
        for remark in snapshot.remarks_to_users():
            content = self._text(remark.get("content"), ids)
            events.append(Event(remark.get("author"), "told_user", content, f"- {remark.get('author')} to the user: {content}"))
        for halt in snapshot.halts:
            if halt.get("round") == snapshot.round and halt.get("author") == CHAIR_ID:
                message = self._text(halt.get("message"), ids)
                if halt.get("type") == "done":
                    events.append(Event(CHAIR_ID, "concluded", message, f"- {CHAIR_ID} closed the mission: {message}"))
                    continue
                events.append(Event(CHAIR_ID, "asked", message, f"- {CHAIR_ID} asked the user: {message}"
                                    + (f" (answer: {self._text(halt.get('answer'), ids)})" if halt.get("answer") else "")))
        return events

    def _plan_changes(self) -> str:
        """The changes the user asked for when the engine showed them the plan (``gates.py``)."""
        change = change_request(self.snapshot)
        if change is None:
            return ""
        self._facts.plan_changes = change
        return self._section("The user's changes to the plan", [
            f"You showed the user the plan (the charter, the team, the product tree) for sign-off. They asked for "
            f"these changes before the work goes on: {clip(change, 1200)}",
            "Apply them now: treeOperations to ADD, UPDATE or REMOVE products (names, definitions of done, owners), "
            "bootstrapOverrides if the mission, objectives or constraints change. The engine shows the user the revised "
            "plan again."])

    def _direction(self) -> str:
        """The new direction of a mission the user continued after it ended (or forked), at the first Plan after."""
        given = [c for c in self.snapshot.collabs if c.get("author") == USER_ID
                 and c.get("type") == USER_DIRECTION_TYPE and c.get("round") == self.snapshot.round - 1]
        if not given:
            return ""
        self._facts.direction = str(given[-1].get("comment"))
        return self._section("The user's new direction", [
            f"After round {self.snapshot.round - 1} the user gave the mission a new direction (it had ended and "
            f"was continued, or was forked from that round): {whole(given[-1].get('comment'), BOUNDS.text)}",
            "Follow it: ADD the products it needs, UPDATE a product it changes (an UPDATE of an accepted product "
            "reopens it; its next version is numbered after the old ones), and assign the work."])

    # ------------------------------------------------------------------- shared pieces

    def _answered_halts(self) -> str:
        """What the user said: the answers to the Chair's questions, the user's open notes, and the
        mission file's answers no question has taken yet (the user gave them before the work
        started). Every product must follow them (a version that departs from them is wrong)."""
        # A gate's answer (a plan signed off, a tool call decided) is no answer to the agents' questions.
        answered = [h for h in self.snapshot.halts if h.get("status") == "answered" and not h.get("gate")]
        answered = sorted(answered, key=lambda h: h.get("answered_round", 0))[-3:]
        lines = [f"The Chair asked: {whole(h.get('message'), BOUNDS.text)}\nThe user answered: "
                 f"{whole(h.get('answer'), BOUNDS.text)}" for h in answered]
        in_advance = self._answers_in_advance()
        lines += [f"The user said, before the work started: {whole(answer, BOUNDS.text)}" for answer in in_advance]
        user_notes = [c for c in self.snapshot.open_collabs() if c.get("author") == USER_ID]
        lines += [f"The user wrote: {whole(c.get('comment'), BOUNDS.text)}" for c in user_notes[-3:]]
        self._facts.from_user += [UserWord(str(h.get("answer")), int(h.get("answered_round") or h.get("round") or 0),
                                           str(h.get("message"))) for h in answered]
        self._facts.from_user += [UserWord(str(c.get("comment")), int(c.get("round") or 0)) for c in user_notes[-3:]]
        self._facts.in_advance = list(in_advance)
        return self._section("From the user (every product follows these words; a departure from them is an error)",
                             lines)

    def _answers_in_advance(self) -> list[str]:
        """The mission file's answers that no question of the Chair's has taken yet."""
        answers = json.loads(str(self.snapshot.mission.get("spec") or "{}")).get("answers") or []
        used = sum(h.get("answer_source") == ANSWER_FROM_FILE for h in self.snapshot.halts)
        return [str(answer) for answer in answers[used:]]

    def _since_last_turn(self, agent_id: str, step: str, ids: TempIds) -> str:
        """Delta loading: acceptances and verdicts since the agent's previous round."""
        if self.snapshot.round <= 1 or step == Step.BOOTSTRAP:
            return ""
        previous = self.snapshot.round - 1
        lines = []
        for acceptance in self.snapshot.acceptances:
            if acceptance.get("round") == previous:
                product = self.snapshot.products.get(acceptance["product_id"], {})
                lines.append(f"- {'accepted' if acceptance['accepted'] else 'rejected'}: "
                             f"{ids.short('p', acceptance['product_id'])} {product.get('name')}")
        return self._section(f"Since your last turn (round {previous})", lines[-12:])

    def _remarks(self, agent_id: str, step: str, ids: TempIds) -> str:
        remarks = self.snapshot.remarks_for(agent_id, step)
        lines = [f"- from {r.get('author')} [{r['type']}] in round {r.get('round')}'s "
                 f"{Step(r['step']).heading if r.get('step') in _STEPS else r.get('step')}: "
                 f"{self._text(r.get('content'), ids)}" for r in remarks]
        return self._section("Remarks to you (new since your last step)", lines)

    # ---------------------------------------------------------------- context requests

    def serve(self, requests: list, ids: TempIds) -> str:
        """Answer ``request_context``: each request resolved from the graph, whole (up to
        ``BOUNDS.requested`` a part), every id in this call's short ids."""
        parts = []
        for request in requests:
            if request.need == "source":
                parts.append(f"### source {read_source_text(self.graph, request.source_id, ids.sources, BOUNDS.requested)}")
                continue
            if request.need == "search_sources":
                parts.append(f"### {search_text(self.graph, request.query, BOUNDS.text)}")
                continue
            if request.need == "remarks":
                everything = [r for r in self.snapshot.remarks if self.snapshot.is_recipient(r, self._agent)]
                parts.append("### remarks to you, this round and the last\n" + ("\n".join(
                    f"- from {r.get('author')} [{r['type']}] in round {r.get('round')}: {self._text(r.get('content'), ids)}"
                    for r in everything) or "none"))
                continue
            real = ids.real(request.product_id, "p")
            product = self.snapshot.products.get(real or "")
            if product is None:
                known = ", ".join(ids.shown("p")) or "none yet"
                parts.append(f"### {request.product_id}: no such product in your context (products: {known})")
                continue
            title = f"### {request.need} of {request.product_id} {product['name']}"
            parts.append(f"{title}\n{whole(self._served(request.need, product, ids), BOUNDS.requested)}")
        return f"{REQUESTED_CONTEXT}\n\n" + "\n\n".join(parts)

    def _served(self, need: str, product: dict, ids: TempIds) -> str:
        snapshot = self.snapshot
        if need == "full_content":
            latest = snapshot.latest_version(product["id"])
            if not latest:
                return "no version yet"
            return (self._version_name(latest, ids) + "\n"
                    + ids.text_to_model(self._contents([latest]).get(latest["id"], "")))
        if need == "version_history":
            return "\n".join(self._version_block(v, ids, content=None) for v in snapshot.versions_of(product["id"])) \
                or "no versions"
        if need == "all_feedback":
            seen: set[str] = set()
            lines = []
            for collab in snapshot.collabs:
                if collab.get("product_id") != product["id"] or collab["id"] in seen:
                    continue
                seen.add(collab["id"])
                state = ("answered" if collab["id"] in snapshot.addressed else "open"
                         if collab.get("type") != ENDORSEMENT else "an endorsement: no answer needed")
                lines.append(f"- {self._collab_line(collab, ids, limit=BOUNDS.requested)} ({state})")
            return "\n".join(lines) or "no feedback"
        if need == "inspections":
            lines = []
            for version in snapshot.versions_of(product["id"]):
                for inspection in snapshot.inspections:
                    if inspection.get("version_id") == version["id"]:
                        lines += self._inspection_lines(inspection, ids)
            return "\n".join(lines) or "no inspections yet"
        if need == "reflections":
            found = [r for r in snapshot.reflections if r["product_id"] == product["id"]]
            return "\n".join(self._reflection_block(r, ids) for r in found) or "no reflection on it this round"
        # peer_content: the latest content of the product's siblings
        siblings = [p for p in snapshot.live_products()
                    if p.get("parent_id") == product.get("parent_id") and p["id"] != product["id"]]
        peers = [v for v in (snapshot.latest_version(p["id"]) for p in siblings) if v]
        contents = self._contents(peers)
        return "\n\n".join(self._version_block(v, ids, content=contents.get(v["id"])) for v in peers) or "no peer content"


_STEPS = frozenset(Step)


def _version_id(version: dict, ids: TempIds) -> str:
    """A version's short id (``p2.v1``); its product's (``p2``) is shown with it, so both map back."""
    ids.short("p", version["product_id"])
    return ids.short("v", version["id"])


def _reasoning_field(step: Step) -> str:
    """Where a step's answer says what it weighed: ``reasoning``, or the Chair's ``thinking``."""
    fields = STEP_OUTPUTS[step].model_fields
    return "`reasoning`" if "reasoning" in fields else "`thinking`" if "thinking" in fields else "your answer"


def _as_list(value: object) -> list:
    """A list field as the graph keeps it: a list, JSON text of one, or nothing."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return [value] if value else []
    return list(value) if isinstance(value, (list, tuple)) else []
