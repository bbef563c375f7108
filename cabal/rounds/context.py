"""The context of one model call: a slice of the graph built for that agent and step.

Small by construction, and stable where it can be, for the provider's prompt cache: the
system prompt comes in two blocks, the role's (how the team works, the step's instructions:
the same for every agent of a role in a step) and the agent's own (name, persona, skills: the
same for that agent from one round to the next); the user message starts with the mission's
charter, the same in every call of a mission; then comes what varies: the round, a minimal
product tree, the detail this step needs and what changed since the agent last acted. Each
section has a character budget, so a prompt stays about the same size at round 20 as at
round 2, however long the history grows. Ids are short and temporary (``TempIds``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from string import Template

from langchain_core.messages import HumanMessage, SystemMessage

from cabal.errors import ConfigError
from cabal.graph import ContextGraph
from cabal.resources import builtin_dir, files_by_name
from cabal.rounds.facts import Candidate, Event, FactsDraft, ProductDetail, Reflection, TreeProduct, TurnFacts, VersionRef
from cabal.rounds.facts import Assignment as AssignmentFact
from cabal.rounds.facts import Source as SourceFact
from cabal.rounds.ids import TempIds
from cabal.rounds.snapshot import Snapshot
from cabal.rounds.sources import read_source_text, search_text, source_line
from cabal.rounds.team import Team
from cabal.vocabulary import CHAIR_ID, USER_DIRECTION_TYPE, USER_ID, Role, Step
from cabal.yaml_reader import read_text_file

# Character budgets per section (about 4 characters per token).
TREE_LINES = 24
CONTENT_CHARS = 2400  # one version's content, beyond which it is cut (full_content shows it all)
SECTION_CHARS = 6000  # any one detail section
ITEM_CHARS = 400  # one collab comment, remark or finding
OPEN_FEEDBACK_SHOWN = 8  # a product's latest open collabs shown with it
REQUESTED_CONTEXT = "REQUESTED CONTEXT"  # how the answer to request_context starts
LAST_ROUND = " (the last round: versions written now are accepted or rejected at the closing decisions after Inspect)"


def clip(text: str | None, limit: int) -> str:
    text = " ".join(str(text or "").split()) if limit <= ITEM_CHARS else str(text or "")
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


class PromptLibrary:
    """The prompt templates: prompts/system.md and prompts/steps/<step>.md (user dirs override)."""

    def __init__(self, extra_dirs: list[Path] | None = None, *, skill_dirs: list[Path] | None = None) -> None:
        dirs = [Path(d) for d in extra_dirs or []]
        self.skill_dirs = [Path(d) for d in skill_dirs or []]
        self._skills: dict[str, str] = {}
        top_level = files_by_name("prompts", (".md",), dirs)
        self.system = self._read(top_level, "system")
        self.agent = self._read(top_level, "agent")
        found: dict[str, Path] = {}
        for folder in [builtin_dir("prompts") / "steps", *(d / "steps" for d in dirs)]:  # later wins
            if folder.is_dir():
                found.update({p.stem: p for p in sorted(folder.glob("*.md"))})
        self.steps = {step: self._read(found, step) for step in Step}

    @staticmethod
    def _read(files: dict[str, Path], name: str) -> Template:
        if name not in files:
            raise ConfigError(f"prompt template {name!r} not found",
                              hint="prompts/ must hold system.md, agent.md and steps/*.md")
        return Template(read_text_file(files[name]))

    def skill_text(self, name: str) -> str:
        """A skill's Markdown (skills/NAME.md, user folders first); unknown names are an error."""
        if name not in self._skills:
            from cabal.skills import load_skill

            self._skills[name] = load_skill(name, self.skill_dirs).text.strip()
        return self._skills[name]

    def system_prompt(self, *, agent_id: str, agent_name: str, role_title: str, persona: str, step: Step,
                      skills: tuple[str, ...] = ()) -> tuple[str, str]:
        """The role's block (prompts/system.md) and the agent's own (prompts/agent.md, then its
        skills). Both templates take every placeholder; the split is only where the cache's
        prefix stops being shared by the other agents of the role."""
        values = {
            "agent_id": agent_id, "agent_name": agent_name, "role_title": role_title, "persona": persona,
            "step_title": step.heading, "step_instructions": self.steps[step].template.strip(),
        }
        blocks = []
        for name, template in (("system", self.system), ("agent", self.agent)):
            try:
                blocks.append(template.substitute(values).strip())
            except (KeyError, ValueError) as exc:
                raise ConfigError(f"prompts/{name}.md: unknown placeholder {exc}") from None
        # An agent's skills are domain knowledge it brings to every step: part of the stable,
        # cached prefix, not of the per-call context.
        own = blocks[1] + "".join(f"\n\nYour skill, {name}:\n\n{self.skill_text(name)}" for name in skills)
        return blocks[0], own.strip()


@dataclass
class Prompt:
    system: tuple[str, str]  # the role's block, then the agent's own (PromptLibrary.system_prompt)
    user: str
    ids: TempIds = field(default_factory=TempIds)
    facts: TurnFacts | None = None  # the same turn as data, for fake models
    charter: str = ""  # the mission's part of the user message: the same in every call of the mission

    def system_message(self) -> SystemMessage:
        """The system prompt as its two blocks, so the provider can cache the role's block for
        every agent of the role and the agent's block for that agent (``llm/call.py``)."""
        return SystemMessage([{"type": "text", "text": text} for text in self.system if text])

    def first_message(self) -> HumanMessage:
        """The user message: the charter, then what this call is about, as two blocks, so the
        provider can cache the prefix up to the end of the charter (``llm/call.py``)."""
        if not self.charter:
            return HumanMessage(self.user)
        return HumanMessage([{"type": "text", "text": self.charter}, {"type": "text", "text": self.user}])


class ContextBuilder:
    """Builds the prompt of one agent's turn in one step."""

    def __init__(self, graph: ContextGraph, snapshot: Snapshot, team: Team, prompts: PromptLibrary) -> None:
        self.graph = graph
        self.snapshot = snapshot
        self.team = team
        self.prompts = prompts

    # ------------------------------------------------------------------------------ api

    @property
    def _watchdogs(self) -> list[str]:
        return self.team.ids(Role.WATCHDOG)

    def build(self, agent_id: str, step: Step, *, extra: list[str] | None = None) -> Prompt:
        agent = self.team.get(agent_id)
        assert agent is not None, f"{agent_id} takes a turn, so is on the team"
        card = self.team.cards[agent.role]
        # The Chair writes personas and domains at bootstrap (and may change them later): they
        # replace the role card's persona and tell each operative what it is responsible for.
        persona = str(_charter_map(self.snapshot.mission, "personas").get(agent_id)
                      or self.snapshot.agents.get(agent_id, {}).get("persona") or agent.persona or card.persona)
        if agent.focus:  # several watchdogs share the inspection: each knows its part
            persona += (f"\n\nYour focus: {', '.join(agent.focus)} findings only; "
                        "the team's other watchdogs inspect the rest.")
        system = self.prompts.system_prompt(agent_id=agent_id, agent_name=agent.name, role_title=card.title,
                                            persona=str(persona), step=step, skills=agent.skills)
        ids = TempIds(agents=frozenset(self.team.ids()),
                      sources={s["source_id"]: s for s in self.snapshot.current_sources()})
        self._facts = FactsDraft()
        limit = self.snapshot.mission.get("rounds")
        sections = [f"# Round {self.snapshot.round}" + (f" of {limit}" if limit else "")
                    + (LAST_ROUND if limit and self.snapshot.round >= int(limit) else "")]
        if step != Step.BOOTSTRAP:
            sections.append(self._tree(agent_id, step, ids))
        detail = getattr(self, f"_detail_{step}")(agent_id, ids)
        sections += [s for s in detail if s]
        sections.append(self._since_last_turn(agent_id, step, ids))
        sections.append(self._remarks(agent_id))
        sections += extra or []
        sections.append(f"## Valid ids\n{ids.summary()} · users u:all, u:user (new products: new-1, new-2, ...)"
                        if step == Step.PLAN else f"## Valid ids\n{ids.summary()}")
        facts = self._facts.freeze(round=self.snapshot.round, step=step, agent=agent_id,
                                   request=str(self.snapshot.mission.get("request") or ""),
                                   team=tuple((a.id, a.role) for a in self.team.agents), focus=agent.focus)
        return Prompt(system=system, user="\n\n".join(s for s in sections if s).strip(), ids=ids, facts=facts,
                      charter=self._charter(agent_id))

    # ---------------------------------------------------------------------------- sections

    def _charter(self, agent_id: str) -> str:
        mission = self.snapshot.mission
        lines = []
        if mission.get("charter"):
            lines += ["## Mission", clip(mission["charter"], 2000)]
            for title, key in (("Objectives", "objectives"), ("Constraints", "constraints")):
                items = mission.get(key) or []
                if items:
                    lines += [f"## {title}", *[f"- {clip(item, ITEM_CHARS)}" for item in items[:12]]]
        else:
            lines += ["## The user's request", clip(mission.get("request"), 4000)]
        domain = _charter_map(mission, "domains").get(agent_id)
        agent = self.team.get(agent_id)
        if not domain and agent is not None and agent.domain:  # the card's, until the Chair gives one
            domain = {"responsibility": agent.domain}
        if isinstance(domain, dict) and domain.get("responsibility"):
            lines.append(f"## Your domain\n{clip(domain['responsibility'], ITEM_CHARS)}"
                         + (f" (area: {clip(domain.get('area'), 80)})" if domain.get("area") else ""))
        return "\n".join(lines)

    def _tree_line(self, product: dict, ids: TempIds, depth: int) -> str:
        latest = self.snapshot.latest_version(product["id"])
        open_count = len(self.snapshot.open_collabs(product["id"]))
        parts = [f"{ids.short('p', product['id'])} [{product['type']}] {clip(product['name'], 80)}",
                 f"owner {product.get('owner') or '-'}", product.get("status", "open"),
                 f"v{latest['number']}" if latest else "no version"]
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

    @staticmethod
    def _version_ref(version: dict, ids: TempIds) -> VersionRef:
        return VersionRef(ids.short("v", version["id"]), ids.short("p", version["product_id"]), version["number"],
                          version.get("author"))

    def _version_block(self, version: dict, ids: TempIds, *, content: str | None) -> str:
        head = (f"{ids.short('v', version['id'])}: v{version['number']} of "
                f"{ids.short('p', version['product_id'])} by {version.get('author')}"
                f" (round {version.get('round')}): {clip(version.get('title'), 120)}")
        lines = [head, f"Change summary: {clip(version.get('change_summary'), ITEM_CHARS)}"]
        if content is not None:
            text = ids.text_to_model(content)
            cut = len(text) > CONTENT_CHARS
            lines += ["Content:", clip(text, CONTENT_CHARS)]
            if cut:
                lines.append("(content cut; request full_content to read all of it)")
        return "\n".join(lines)

    def _contents(self, versions: list[dict]) -> dict[str, str]:
        return self.snapshot.contents([v["id"] for v in versions], self._read_contents)

    def _read_contents(self, version_ids: list[str]) -> dict[str, str]:
        return {v["id"]: v.get("content", "") for v in self.graph.get_many(version_ids)}

    def _collab_line(self, collab: dict, ids: TempIds) -> str:
        # A user's note may target no product (type user_independent).
        target = ids.short("p", collab["product_id"]) if collab.get("product_id") else "the mission"
        return (f"{ids.short('c', collab['id'])} on {target} "
                f"[{collab['type']}, importance {collab.get('importance')}] by {collab.get('author')}: "
                f"{clip(ids.text_to_model(collab.get('comment', '')), ITEM_CHARS)}")

    def _product_fact(self, product: dict, ids: TempIds) -> ProductDetail:
        """The facts ``_product_detail`` shows: its latest version, the verdict, the open feedback."""
        latest = self.snapshot.latest_version(product["id"])
        verdict = self.snapshot.verdict_of(latest["id"], self._watchdogs) if latest else None
        return ProductDetail(
            ids.short("p", product["id"]), product["name"], product["type"], str(product.get("dod") or ""),
            VersionRef(ids.short("v", latest["id"]), ids.short("p", product["id"]), latest["number"],
                       latest.get("author")) if latest else None,
            verdict,
            tuple(ids.short("c", c["id"]) for c in self.snapshot.open_collabs(product["id"])[-OPEN_FEEDBACK_SHOWN:]),
        )

    def _product_detail(self, product: dict, ids: TempIds, *, with_content: bool = True) -> str:
        snapshot = self.snapshot
        lines = [f"### {ids.short('p', product['id'])} {product['name']} [{product['type']}]",
                 f"DoD: {clip(product.get('dod'), 1000)}"]
        latest = snapshot.latest_version(product["id"])
        if latest:
            contents = self._contents([latest]) if with_content else {}
            lines.append(self._version_block(latest, ids, content=contents.get(latest["id"]) if with_content else None))
            several = len(self._watchdogs) > 1
            for inspection in snapshot.inspections_of(latest["id"], self._watchdogs):
                by = f" by {inspection.get('author')}" if several else ""
                lines.append(f"Inspection{by}: {inspection['assessment']}")
                for finding in snapshot.findings_of(inspection["id"])[:6]:
                    lines.append(f"- [{finding['category']} {finding['severity']}] {clip(finding.get('issue'), ITEM_CHARS)}")
        feedback = snapshot.open_collabs(product["id"])
        if feedback:
            lines.append("Open feedback:")
            lines += [f"- {self._collab_line(c, ids)}" for c in feedback[-OPEN_FEEDBACK_SHOWN:]]
        return "\n".join(lines)

    def _section(self, title: str, blocks: list[str], compact: list[str] | None = None) -> str:
        """Blocks up to the budget. ``compact`` (one short form per block) is for sections whose
        every item the step must act on: what does not fit is listed in its short form."""
        if not blocks:
            return ""
        text, used = [f"## {title}"], 0
        for index, block in enumerate(blocks):
            if used + len(block) > SECTION_CHARS:
                if compact:
                    text.append(f"(+ {len(blocks) - index} more, in short; request full_content to read them)")
                    text += compact[index:]
                    break
                text.append(f"(+ {len(blocks) - index} more not shown; use request_context)")
                break
            text.append(block)
            used += len(block)
        return "\n".join(text)

    # ---------------------------------------------------------------- per-step detail

    def _sources(self) -> str:
        """The user's sources, one line each: what to request (need source, search_sources) and cite."""
        sources = self.snapshot.current_sources()
        if not sources:
            return ""
        self._facts.sources += [SourceFact(s["source_id"], str(s["name"]), str(s.get("note") or ""),
                                           int(s.get("chunk_count") or 0), str(s.get("first_heading") or ""))
                                for s in sources]
        lines = [source_line(s) for s in sources]
        return self._section("The user's sources (read them with request_context: need source with sourceId s1 or "
                             "a section s1#2, or need search_sources with a query; cite them as [[s:s1]] or "
                             "[[s:s1#2]])", lines)

    def _detail_bootstrap(self, agent_id: str, ids: TempIds) -> list[str]:
        team = [f"- {a.id} ({a.role})" for a in self.team.agents]
        return ["## The team\n" + "\n".join(team), self._sources(), self._answered_halts()]

    def _detail_reflect(self, agent_id: str, ids: TempIds) -> list[str]:
        mine = [p for p in self.snapshot.owned_by(agent_id) if p.get("status") == "open"]
        owned = [self._product_detail(p, ids) for p in mine]
        self._facts.products += [self._product_fact(p, ids) for p in mine]
        # The user's notes left since the last round are read at this Reflect (and at Plan & Assign).
        notes = [c for c in self.snapshot.open_collabs() if c.get("author") == USER_ID
                 and c.get("round") == self.snapshot.round - 1]
        return [self._section("Your products", owned),
                self._section("From the user", [f"The user wrote: {clip(c.get('comment'), 1200)}" for c in notes[-3:]])]

    def _detail_plan(self, agent_id: str, ids: TempIds) -> list[str]:
        snapshot = self.snapshot
        reflections = [
            f"- {r.get('author')} on {ids.short('p', r['product_id'])}: DoD {r['dod_status']}; next: "
            f"{clip(r.get('next_version_delta'), ITEM_CHARS)}" for r in snapshot.reflections_in()
        ]
        self._facts.reflections += [Reflection(r.get("author"), ids.short("p", r["product_id"]), r["dod_status"])
                                    for r in snapshot.reflections_in()]
        candidates = []
        for product in snapshot.live_products():
            latest = snapshot.latest_version(product["id"])
            if product.get("status") == "open" and latest:
                verdict = snapshot.verdict_of(latest["id"], self._watchdogs) or "not inspected"
                blocking = len(snapshot.blocking_collabs(product["id"]))
                candidate = Candidate(ids.short("p", product["id"]), product["name"], ids.short("v", latest["id"]),
                                      latest["number"], verdict, blocking)
                self._facts.candidates.append(candidate)
                candidates.append(f"- {candidate.product} {candidate.name}: latest {candidate.version} "
                                  f"(v{candidate.number}), inspection {verdict}"
                                  + (f", {blocking} blocking collab(s)" if blocking else ""))
        feedback = [f"- {self._collab_line(c, ids)}" for c in snapshot.open_collabs()
                    if int(c.get("importance", 0)) >= 5 or c.get("author") == USER_ID]
        assignments = [f"- {ids.short('p', a['product_id'])} → {a['assignee']} (since round {a['round']})"
                       for a in snapshot.active_assignments()]
        operatives = [f"- {a.id}: {len(snapshot.owned_by(a.id))} product(s)" for a in self.team.agents
                      if a.role == Role.OPERATIVE]
        return [
            self._direction(),
            self._section("Reflections this round", reflections),
            self._section("Versions awaiting a decision", candidates),
            self._section("Open feedback (importance 5+ and from the user)", feedback),
            self._section("Active assignments", assignments),
            "## Operatives\n" + "\n".join(operatives),
            self._sources(),
            self._answered_halts(),
        ]

    def _detail_write(self, agent_id: str, ids: TempIds) -> list[str]:
        blocks, compact = [], []
        for assignment in self.snapshot.assignments_in():
            if assignment.get("assignee") != agent_id:
                continue
            product = self.snapshot.products.get(assignment["product_id"])
            if not product:
                continue
            directive = (f"Directive (importance {assignment.get('importance')}): {assignment.get('objective')}\n"
                         f"Done when: {assignment.get('dod')}\nWhy: {assignment.get('why')}"
                         + (f"\nContext: {ids.text_to_model(assignment['context'])}" if assignment.get("context") else ""))
            blocks.append(self._product_detail(product, ids) + "\n" + directive)
            self._facts.assignments.append(AssignmentFact(self._product_fact(product, ids),
                                                          str(assignment.get("objective") or ""),
                                                          assignment.get("importance")))
            compact.append(f"### {ids.short('p', product['id'])} {product['name']} [{product['type']}]\n"
                           f"Directive (importance {assignment.get('importance')}): {clip(assignment.get('objective'), ITEM_CHARS)}")
            for attached in json.loads(assignment.get("attached") or "[]"):
                other = self.snapshot.products.get(attached.get("productId"))
                if other:
                    blocks.append("Attached: " + self._product_detail(other, ids, with_content="content" in attached.get("include", [])))
                    compact.append(f"Attached: {ids.short('p', other['id'])} {other['name']}")
        return [self._section("Your assignments this round", blocks, compact), self._sources() if blocks else ""]

    def _detail_peer_review(self, agent_id: str, ids: TempIds) -> list[str]:
        versions = [v for v in self.snapshot.new_versions()
                    if self.snapshot.products.get(v["product_id"], {}).get("owner") != agent_id and v.get("author") != agent_id]
        contents = self._contents(versions)
        blocks = [f"### {self.snapshot.products[v['product_id']]['name']} — DoD: "
                  f"{clip(self.snapshot.products[v['product_id']].get('dod'), 600)}\n"
                  + self._version_block(v, ids, content=contents.get(v["id"])) for v in versions]
        self._facts.new_versions += [self._version_ref(v, ids) for v in versions]
        return [self._section("New versions to review", blocks)]

    def _detail_inspect(self, agent_id: str, ids: TempIds) -> list[str]:
        versions = self.snapshot.new_versions()
        contents = self._contents(versions)
        blocks = []
        for version in versions:
            product = self.snapshot.products[version["product_id"]]
            reviews = [f"- {r.get('author')}: {r['assessment']}: {clip(r.get('summary'), ITEM_CHARS)}"
                       for r in self.snapshot.reviews_of(version["id"])]
            blocks.append(f"### {product['name']} [{product['type']}] — DoD: {clip(product.get('dod'), 800)}\n"
                          + self._version_block(version, ids, content=contents.get(version["id"]))
                          + ("\nPeer reviews:\n" + "\n".join(reviews) if reviews else ""))
        compact = [self._version_block(v, ids, content=None).split("\n", 1)[0] for v in versions]
        self._facts.new_versions += [self._version_ref(v, ids) for v in versions]
        return [self._section("New versions to inspect", blocks, compact)]

    def _detail_presentation(self, agent_id: str, ids: TempIds) -> list[str]:
        events = self._round_events()
        self._facts.events += events
        self._facts.speakers += self.team.speakers(agent_id)
        return [self._section("What happened this round", [e.text for e in events] or ["- nothing was written this round"]),
                f"You may speak as: {', '.join(self.team.speakers(agent_id))}."]

    def _detail_close(self, agent_id: str, ids: TempIds) -> list[str]:
        """The closing decisions (the last round, after Inspect): the Plan's picture of what awaits
        a decision (its facts too), then each open product's version of this round whole, with its
        DoD, peer reviews and inspections: no reflection speaks for it, so the Chair judges it."""
        plan = [s for s in self._detail_plan(agent_id, ids) if s.startswith((
            "## Reflections this round", "## Versions awaiting a decision", "## Open feedback"))]
        versions = [v for v in self.snapshot.new_versions()
                    if self.snapshot.products.get(v["product_id"], {}).get("status") == "open"]
        contents = self._contents(versions)
        blocks = []
        for version in versions:
            product = self.snapshot.products[version["product_id"]]
            lines = [f"### {product['name']} [{product['type']}] — DoD: {product.get('dod')}",
                     self._version_block(version, ids, content=contents.get(version["id"]))]
            lines += [f"Peer review by {r.get('author')}: {r['assessment']}: {ids.text_to_model(r.get('summary') or '')}"
                      for r in self.snapshot.reviews_of(version["id"])]
            for inspection in self.snapshot.inspections_of(version["id"], self._watchdogs):
                lines.append(f"Inspection by {inspection.get('author')}: {inspection['assessment']}")
                lines += [f"- [{f['category']} {f['severity']}] {ids.text_to_model(f.get('issue') or '')} "
                          f"Recommendation: {ids.text_to_model(f.get('recommendation') or '')}"
                          for f in self.snapshot.findings_of(inspection["id"])]
            blocks.append("\n".join(lines))
        compact = [self._version_block(v, ids, content=None).split("\n", 1)[0] for v in versions]
        self._facts.new_versions += [self._version_ref(v, ids) for v in versions]
        return [*plan, self._section("Versions written this round", blocks, compact)]

    def _round_events(self) -> list[Event]:
        """What happened this round, one line each: versions, decisions, assignments, remarks to
        the user, questions asked."""
        snapshot = self.snapshot
        events = []
        for version in snapshot.new_versions():
            verdict = snapshot.verdict_of(version["id"], self._watchdogs)
            name = snapshot.products[version["product_id"]]["name"]
            events.append(Event(version.get("author"), "wrote", name,
                                f"- {version.get('author')} wrote v{version['number']} of {name}: "
                                f"{clip(version.get('change_summary'), 200)}"
                                + (f" (inspection: {verdict})" if verdict else "")))
        for acceptance in snapshot.acceptances:
            if acceptance.get("round") == snapshot.round:
                name = snapshot.products.get(acceptance["product_id"], {}).get("name")
                verb = "accepted" if acceptance["accepted"] else "rejected"
                events.append(Event(CHAIR_ID, verb, name, f"- {CHAIR_ID} {verb} {name}"
                                    + (f": {clip(acceptance.get('rejection_reason'), 200)}"
                                       if acceptance.get("rejection_reason") else "")))
        for assignment in snapshot.assignments_in():
            name = snapshot.products.get(assignment["product_id"], {}).get("name")
            events.append(Event(CHAIR_ID, "assigned", name, f"- {CHAIR_ID} assigned {name} to {assignment['assignee']}: "
                                                            f"{clip(assignment.get('objective'), 160)}"))
        for remark in snapshot.remarks_to_users():
            content = clip(remark.get("content"), ITEM_CHARS)
            events.append(Event(remark.get("author"), "told_user", content, f"- {remark.get('author')} to the user: {content}"))
        for halt in snapshot.halts:
            if halt.get("round") == snapshot.round and halt.get("author") == CHAIR_ID:
                message = clip(halt.get("message"), ITEM_CHARS)
                if halt.get("type") == "done":
                    events.append(Event(CHAIR_ID, "concluded", message, f"- {CHAIR_ID} closed the mission: {message}"))
                    continue
                events.append(Event(CHAIR_ID, "asked", message, f"- {CHAIR_ID} asked the user: {message}"
                                    + (f" (answer: {clip(halt.get('answer'), 200)})" if halt.get("answer") else "")))
        return events

    def _direction(self) -> str:
        """The new direction of a mission the user continued after it ended, at the first Plan after."""
        given = [c for c in self.snapshot.collabs if c.get("author") == USER_ID
                 and c.get("type") == USER_DIRECTION_TYPE and c.get("round") == self.snapshot.round - 1]
        if not given:
            return ""
        self._facts.direction = str(given[-1].get("comment"))
        return self._section("The user's new direction", [
            f"The mission had ended after round {self.snapshot.round - 1}; the user continued it with a new "
            f"direction: {clip(given[-1].get('comment'), 1200)}",
            "Follow it: ADD the products it needs, UPDATE a product it changes (an UPDATE of an accepted product "
            "reopens it; its next version is numbered after the old ones), and assign the work."])

    # ------------------------------------------------------------------- shared pieces

    def _answered_halts(self) -> str:
        answered = [h for h in self.snapshot.halts if h.get("status") == "answered"]
        answered = sorted(answered, key=lambda h: h.get("answered_round", 0))[-3:]
        lines = [f"You asked: {clip(h.get('message'), 600)}\nThe user answered: {clip(h.get('answer'), 1200)}"
                 for h in answered]
        user_notes = [c for c in self.snapshot.open_collabs() if c.get("author") == USER_ID]
        lines += [f"The user wrote: {clip(c.get('comment'), 1200)}" for c in user_notes[-3:]]
        return self._section("From the user", lines)

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

    def _remarks(self, agent_id: str) -> str:
        remarks = self.snapshot.remarks_for(agent_id)
        lines = [f"- from {r.get('author')} [{r['type']}]: {clip(r.get('content'), ITEM_CHARS)}" for r in remarks[-10:]]
        return self._section("Remarks to you", lines)

    # ---------------------------------------------------------------- context requests

    def serve(self, requests: list, ids: TempIds) -> str:
        """Answer ``request_context``: each request resolved from the graph, ids kept short."""
        parts = []
        for request in requests:
            if request.need == "source":
                parts.append(f"### source {read_source_text(self.graph, request.source_id, ids.sources, 4 * CONTENT_CHARS)}")
                continue
            if request.need == "search_sources":
                parts.append(f"### {search_text(self.graph, request.query, ITEM_CHARS * 2)}")
                continue
            real = ids.real(request.product_id)
            product = self.snapshot.products.get(real or "")
            if product is None:
                parts.append(f"{request.product_id}: unknown product")
                continue
            title = f"### {request.need} of {request.product_id} {product['name']}"
            if request.need == "full_content":
                latest = self.snapshot.latest_version(product["id"])
                body = (ids.text_to_model(self._contents([latest]).get(latest["id"], "")) if latest else "no version yet")
            elif request.need == "version_history":
                body = "\n".join(self._version_block(v, ids, content=None) for v in self.snapshot.versions_of(product["id"])) or "no versions"
            elif request.need == "all_feedback":
                collabs = [c for c in self.snapshot.collabs if c.get("product_id") == product["id"]]
                body = "\n".join(f"- {self._collab_line(c, ids)} ({'addressed' if c['id'] in self.snapshot.addressed else 'open'})" for c in collabs) or "no feedback"
            else:  # peer_content: the latest content of the product's siblings
                siblings = [p for p in self.snapshot.live_products()
                            if p.get("parent_id") == product.get("parent_id") and p["id"] != product["id"]]
                peers = [v for v in (self.snapshot.latest_version(p["id"]) for p in siblings) if v]
                contents = self._contents(peers)
                body = "\n\n".join(self._version_block(v, ids, content=contents.get(v["id"])) for v in peers) or "no peer content"
            parts.append(f"{title}\n{clip(body, 4 * CONTENT_CHARS)}")
        return f"{REQUESTED_CONTEXT}\n\n" + "\n\n".join(parts)


def _charter_map(mission: dict, key: str) -> dict:
    """A mapping the charter keeps on the mission node as JSON (personas, domains); {} if none."""
    value = mission.get(key)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}
