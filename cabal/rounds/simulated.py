"""A simulated team: a model that plays every role with valid, minimal, meaningful answers.

Like pydantic-ai's ``TestModel``, but aware of Cabal's rules: it reads the facts of each turn
(``ModelRequest.facts``, the ``TurnFacts`` the prompt was written from, with its short ids
``p1``/``p1.v1``/``c1``) and answers what a diligent team would, so a mission runs offline for any
number of rounds without a script.

    cabal run mission.yaml --model py:cabal.rounds.simulated:team

What each role does:

- Chair, Bootstrap: a charter from the request, a persona and a domain per agent, and one
  product, the ``Library`` (a ``Collection``). When the mission file has ``answers:`` left
  (``TurnFacts.answers_waiting``), it first asks the user one question (a ``question`` halt),
  so the question flow shows offline; the answer goes into the constraints and every
  definition of done. With no answers to give, it never asks: a run ends by itself. It
  records one decision: the names of the deliverables.
- Chair, Plan & Assign: in round 1 (in round 0 when the plan waits for sign-off), ADDs under
  the Library one ``Content`` product per deliverable the request names (``deliverables``: a
  small grammar of lists; three general products when it names none), each with a definition
  of done that quotes the request. A change the user writes at the plan's sign-off
  (``TurnFacts.plan_changes``) it applies as a real Chair would: each rename, removal and
  addition ``deliverables.plan_change`` reads becomes an UPDATE, a REMOVE or an ADD. Accepts every product whose latest version passed inspection and whose
  owner reflected ``met``; ADDs ``products_per_round`` more ``Content`` products a round;
  assigns each open work product without an approved latest version to its owner. The owners
  of the products it adds are a decision of its record, changed (same id) when it adds more. It halts
  ``done`` in round ``done_at_round`` (if given), or when every work product is accepted and
  nothing is left to add. The user's word goes into the directives' context: a new direction
  (a mission continued after it ended) reopens the first accepted work product with an UPDATE
  and ADDs what the direction names; a message the user left since the last round
  (``cabal say``) goes to the open work, or reopens the first accepted product when none is
  open.
- Chair, Closing decisions (after Inspect, in a round where a version passed; in the last round
  where any was written): accepts each version that passed inspection without blocking feedback;
  ends the mission (``done``) when that leaves nothing open.
- Operatives: Reflect ``met`` on products whose latest version is approved, else ``not_met``,
  answering every open collab they are shown; Write a version of each assignment that says
  what the product is for (its definition of done), takes up the directive's context (the
  user's direction or message) and outlines the product; Peer Review approves every version
  shown, with a suggestion now and then. When the mission has sources, a writer first
  requests the first source and searches the sources for its product's words, then quotes
  the best section found, cited as ``[[s:s1#2]]``, and cites the source read (``[[s:s1]]``).
  When a tool of the mission's MCP servers is offered, a writer calls the first one once (the
  assignment's name for each required text argument) and quotes its answer in each version.
- Watchdog: inspects every new version: ``approved``, with one minor finding (of its focus's
  first category, when its card gives it a focus).
- Envoy: one message per speaker who did something this round.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import ToolMessage

from cabal.errors import ModelError
from cabal.llm.scripted import FunctionChatModel, ModelRequest
from cabal.refs import parse_refs
from cabal.rounds.context import REQUESTED_CONTEXT
from cabal.rounds.deliverables import deliverables, plan_change
from cabal.rounds.facts import BaselineFacts, ComparisonFacts, TreeProduct, TurnFacts
from cabal.tools.spec import SEPARATOR as TOOL_SEPARATOR
from cabal.vocabulary import CHAIR_ID, count_of

CONTAINER_TYPES = ("Collection", "Orchestration", "Decision")  # may hold Content
WORK_TYPES = ("Content", "Decision")  # get versions; Collection/Orchestration only structure
LIBRARY = "Library"  # the Collection every product of the simulated Chair goes under
DELIVERABLES, OWNERS = "Deliverables", "Owners"  # the topics of the simulated Chair's decisions
CONTENT_CHARS = 1500  # a version's content
QUOTE_CHARS = 240  # the sentence quoted from a source
TOPICS = ("overview", "audience", "requirements", "risks", "timeline", "budget", "operations",
          "support", "metrics", "communication", "security", "rollout")
MESSAGE_CHARS = 400
FINDINGS = {  # category: (issue, recommendation) of the one minor finding a watchdog reports
    "quality": ("One sentence could be shorter.", "Tighten it in a later version."),
    "security": ("It does not say who may read the data it mentions.", "Name who has access in a later version."),
    "completeness": ("One point of the definition of done is thin.", "Give it one more concrete detail."),
    "coherence": ("Two sentences say nearly the same thing.", "Merge them in a later version."),
    "integration": ("It does not link to the products it depends on.", "Add the links in a later version."),
}


def _stable(*parts: Any) -> int:
    return zlib.crc32("|".join(map(str, parts)).encode())


def _plain(text: str, limit: int = 80) -> str:
    """A name fit for a one-sentence message: no sentence's end mark (a dot inside a word, as in
    "v1.0", stays), clipped."""
    text = re.sub(r"[.!?]+(?=\s|$)", "", " ".join(text.split()))
    return text[:limit]


@dataclass
class SimulatedTeam:
    """``fn(request)`` for ``FunctionChatModel``: every role, every step."""

    initial_products: int | None = None  # None: the Library and one product per deliverable the request names
    products_per_round: int = 0
    done_at_round: int | None = None
    collab_every: int = 3  # a peer review adds a suggestion to about one version in this many

    def __call__(self, request: ModelRequest) -> dict:
        facts = request.facts
        if isinstance(facts, BaselineFacts):
            return baseline_answer(request, facts)
        if isinstance(facts, ComparisonFacts):
            return {"tool": "final_output", "args": comparison_answer(facts)}
        if not isinstance(facts, TurnFacts):
            raise ModelError("the simulated team plays Cabal missions: the call carries no turn facts "
                             "(it is only answered inside the round engine)", provider="simulated")
        if facts.step == "write" and facts.assignments:
            quote, cited = None, None
            if facts.sources:
                read = _requested_context(request.messages)
                if read is None:
                    return {"tool": "request_context", "args": {"requests": _source_requests(facts)}}
                quote, cited = _quote(read), f"[[s:{facts.sources[0].id}]]"
            offered, quoted = _mcp_tool(request), _tool_answer(request)
            if offered is not None and quoted is None:
                return {"tool": offered["name"], "args": _tool_arguments(offered, facts.assignments[0].product.name)}
            return {"tool": "final_output", "args": self._write(facts, quote=quote, cited=cited, quoted=quoted)}
        answer = getattr(self, f"_{facts.step}")(facts)
        return {"tool": answer[0], "args": answer[1]} if isinstance(answer, tuple) else {"tool": "final_output", "args": answer}

    # -------------------------------------------------------------------- the Chair

    def _planned(self, request: str) -> tuple[str, ...]:
        """The names of the products the Chair starts with: the request's deliverables, cut or
        filled (with ``TOPICS``) to ``initial_products - 1`` when that is given."""
        named = deliverables(request)
        if self.initial_products is None:
            return named
        wanted = max(0, self.initial_products - 1)
        filler = (topic.capitalize() for topic in TOPICS if topic.capitalize() not in named)
        return (named + tuple(filler))[:wanted]

    def _bootstrap(self, facts: TurnFacts) -> dict | tuple[str, dict]:
        operatives = facts.operatives() or ["operative-1"]
        request = " ".join((facts.request or "the user's request").split())
        planned = self._planned(request)
        answers = [w for w in facts.from_user if w.question is not None]
        if facts.answers_waiting and not answers:  # the run answers by itself: show the question flow
            return "halt", {"type": "question", "to": ["u:all"], "message": _clip(
                f"Before the team starts on {_listed(planned)}: who will use them first, and what must the team "
                f"keep to?", 600)}
        kept = [f"Keep to the user's answer: {_plain(w.text, 300)}" for w in answers]
        return {
            "thinking": {"interpretation": f"The user asks: {request[:160]}",
                         "scopeDecisions": f"A Library holding one product per deliverable the request names "
                                           f"({_listed(planned)}); round 1 adds them under it."},
            "mission": f"Deliver what the user asked for as a set of accepted content products: {request}"[:2000],
            "objectives": [f"{name} meets its definition of done and passes inspection" for name in planned][:8]
            or ["Every product meets its definition of done and passes inspection"],
            "constraints": ["Plain text only", "One owner per product", *kept],
            "personas": {a: f"A careful {role} who keeps work small and checkable" for a, role in facts.team
                         if a not in facts.given_personas},
            "operativeDomains": {op: {"responsibility": f"Products assigned to {op}", "area": f"area {n + 1}"}
                                 for n, op in enumerate(operatives)},
            "initialProducts": [{"name": LIBRARY, "type": "Collection", "owner": operatives[0],
                                 "dod": "Holds every product of the mission, each accepted on its own."}],
            "decisions": [{"topic": DELIVERABLES, "decision": _clip(f"The products are named {_listed(planned)}", 600),
                           "why": "Every product names the others the same way."}],
        }

    def _plan(self, facts: TurnFacts) -> dict | tuple[str, dict]:
        round_number, tree = facts.round, list(facts.tree)
        operatives = facts.operatives() or ["operative-1"]
        met = {r.product for r in facts.reflections if r.dod_status == "met"}
        approved = {c.product for c in facts.candidates if c.verdict == "approved"}
        acceptance = [{"productId": c.product, "accepted": True, "versionId": c.version} for c in facts.candidates
                      if c.product in approved and c.product in met and not c.blocking]
        open_work = [p for p in tree if p.status == "open" and p.type in WORK_TYPES]
        if self.done_at_round is not None and round_number >= self.done_at_round:
            return "halt", {"type": "done", "to": ["u:all"],
                            "message": f"The team stops after {round_number - 1} round(s), as planned."}
        parent = _container(tree)
        answers = [w.text for w in facts.from_user if w.question is not None]
        if facts.plan_changes is not None:
            return _revised(facts, parent, answers)
        new: list[tuple[str, str, str]] = []  # (name, definition of done, owner) of each product to ADD
        if parent is not None and not any(p.type in WORK_TYPES for p in tree):  # round 1: the deliverables
            named = set(deliverables(facts.request, default=()))
            new += [(name, _definition(name, facts.request, answers, named=name in named),
                     operatives[index % len(operatives)]) for index, name in enumerate(self._planned(facts.request))]
        if parent is not None and facts.direction:  # what the new direction names, beside what it changes
            there = {p.name.lower() for p in tree}
            new += [(name, _definition(name, facts.direction, answers), operatives[index % len(operatives)])
                    for index, name in enumerate(deliverables(facts.direction, default=())) if name.lower() not in there]
        if parent is not None:
            for index in range(self.products_per_round):
                topic = TOPICS[(round_number + index) % len(TOPICS)]
                new.append((f"{topic.capitalize()} r{round_number}-{index + 1}",
                            f"A complete {topic} section added in round {round_number}, with two specific points.",
                            operatives[(round_number * self.products_per_round + index) % len(operatives)]))
        # The user's word to take up: a new direction, else a note left since the last round; when
        # the mission would end here, a note left in this round before its plan (no later plan reads it).
        notes = [w.text for w in facts.from_user if w.question is None and w.round == round_number - 1]
        if not notes and not facts.direction and tree and not open_work and not new:
            notes = [w.text for w in facts.from_user if w.question is None and w.round == round_number]
        word = (f"the user's new direction: {_plain(facts.direction, 300)}" if facts.direction else
                f"the user's message: {_plain(' / '.join(notes), 300)}" if notes else None)
        first_accepted = next((p for p in tree if p.status == "accepted" and p.type in WORK_TYPES), None)
        waiting = [p for p in open_work if p.id not in approved]  # open work to write again anyway
        held, reopened = None, None  # the product that takes the user's word up when no other work does
        if facts.direction:
            reopened = first_accepted
        elif word and not waiting and not new:
            held = next((p for p in open_work if p.id in approved), None)  # ready, but one more version first
            reopened = first_accepted if held is None else None
        if held is not None:
            acceptance = [a for a in acceptance if a["productId"] != held.id]
        if tree and not open_work and not new and reopened is None:
            return "halt", {"type": "done", "to": ["u:all"], "message": "Every product is accepted; the mission is met."}

        assignments, operations = [], []
        if reopened is not None:  # the user's word changes the first accepted product: it reopens
            owner = reopened.owner if reopened.owner in operatives else operatives[0]
            operations.append({"action": "UPDATE", "productId": reopened.id,
                               "product": {"description": f"Reworked for {word}"[:1000]}})
            assignments.append(_assignment(reopened.id, owner, reopened.name, reopened.version, round_number, word))
        for product in open_work:
            if product.id in approved and product != held:  # passed inspection: accepted now, or soon
                continue
            owner = product.owner if product.owner in operatives else operatives[0]
            assignments.append(_assignment(product.id, owner, product.name, product.version, round_number, word))
        for index, (name, dod, owner) in enumerate(new):
            assert parent is not None, "products are added only under a container"
            new_id = f"new-{index + 1}"
            operations.append({"action": "ADD", "newId": new_id, "parentId": parent.id,
                               "product": {"name": name, "type": "Content", "assignee": owner, "dod": dod}})
            assignments.append(_assignment(new_id, owner, name, None, round_number, word))
        assignments = assignments if round_number else []  # round 0 lays out the work to sign off: round 1 assigns
        return {
            "thinking": {
                "roundStrategy": f"Round {round_number}: {len(assignments)} assignment(s), "
                                 f"{len(new)} new product(s)" + (f", taking up {word}" if word else "") + ".",
                "acceptanceRationale": (f"Accepting {len(acceptance)} product(s) whose latest version passed "
                                        "inspection and whose owner reports the DoD met." if acceptance
                                        else "Nothing is ready to accept yet."),
            },
            "treeOperations": operations,
            "assignments": assignments,
            "acceptance": acceptance, "decisions": _owners(facts, new),
        }

    def _close(self, facts: TurnFacts) -> dict | tuple[str, dict]:
        """The closing decisions: accept each version that passed inspection without blocking
        feedback (this round's on the Chair's own judgement, older ones on a ``met``), and end the
        mission with them when they leave no work open, none is planned, and no word of the user's
        from this round waits for the next Plan."""
        if not facts.candidates:
            return "halt", {"type": "done", "to": ["u:all"], "message": "Every product is accepted; the mission is met."}
        written_now = {v.id for v in facts.new_versions}
        met = {r.product for r in facts.reflections if r.dod_status == "met"}
        acceptance = [{"productId": c.product, "accepted": True, "versionId": c.version} for c in facts.candidates
                      if c.verdict == "approved" and not c.blocking and (c.version in written_now or c.product in met)]
        accepted = {a["productId"] for a in acceptance}
        left = [p for p in facts.tree if p.status == "open" and p.type in WORK_TYPES and p.id not in accepted]
        unread = [w for w in facts.from_user if w.question is None and w.round == facts.round]
        ends = not left and not unread and not self.products_per_round and self.done_at_round is None
        return {"reasoning": f"{len(acceptance)} version(s) passed inspection without blocking feedback, so I "
                             "accept them.", "acceptance": acceptance,
                **({"done": "Every product is accepted; the mission is met."} if ends else {})}

    # ------------------------------------------------------------------- Operatives

    def _reflect(self, facts: TurnFacts) -> dict:
        reflections = []
        for product in facts.products:
            if product.type not in WORK_TYPES and product.latest is None and not product.open_collabs:
                continue  # a container (the Library): nothing to reflect on
            done = product.inspection == "approved"
            reflections.append({
                "refersToProduct": product.id,
                "dodStatus": "met" if done else "not_met",
                "feedbackResponses": [{"collabId": c, "action": "accept", "rationale": "It makes the product clearer.",
                                       "plannedChange": "Fold it into the next version."} for c in product.open_collabs],
                "nextVersionDelta": "None; ready for acceptance." if done else
                                    ("Write the first version." if product.latest is None else
                                     "Answer the inspection and the feedback in a new version."),
            })
        return {"reasoning": f"{len(reflections)} product(s) of mine to judge against their definitions of done.",
                "reflections": reflections}

    def _write(self, facts: TurnFacts, quote: Quote | None = None, cited: str | None = None,
               quoted: str | None = None) -> dict:
        """A version that says what its product is for (its definition of done, which carries
        the request's words), quotes and cites the user's material, and takes up what the
        directive's context brings (the user's direction or message)."""
        versions = []
        for assignment in facts.assignments:
            product = assignment.product
            number = product.latest.number + 1 if product.latest else 1
            parts = [f"{product.name}, version {number}, by {facts.agent} in round {facts.round} for [[p:{product.id}]].",
                     f"What it is for: {product.dod or assignment.objective or 'the directive'}"]
            if assignment.context:
                parts.append(f"What this version changes: it takes up {assignment.context.rstrip('.')}.")
            if quote is not None:
                parts.append(f"The user's material says: \"{quote.text}\" {quote.ref}"
                             + (f", from {cited}." if cited and cited != quote.ref else "."))
            elif cited:
                parts.append(f"From the user's material: {cited}.")
            if quoted:
                parts.append(f"A tool answered: {quoted}.")
            parts.append("Outline: who uses it and when; what it gives them; the first step, its owner and its "
                         "day; what to check before calling it done.")
            content = _clip(" ".join(parts), CONTENT_CHARS)
            summary = ("First version." if number == 1 else
                       f"Version {number}: takes up {assignment.context}" if assignment.context else
                       f"Version {number}: answers the inspection and the feedback.")
            versions.append({"productId": product.id, "newVersion": {
                "contentTitle": f"{product.name} v{number}"[:200], "content": content,
                "changeSummary": _clip(summary, 400),
            }})
        return {"reasoning": f"{len(versions)} assignment(s) this round, each written to its directive.",
                "versions": versions}

    def _peer_review(self, facts: TurnFacts) -> dict:
        reviews, collabs = [], []
        for version in facts.new_versions:
            reviews.append({"productId": version.product, "versionId": version.id, "assessment": "approved",
                            "summary": "Meets its definition of done; clear and concrete."})
            if self.collab_every and _stable(facts.round, facts.agent, version.product) % self.collab_every == 0:
                collabs.append({"refersToProduct": version.product, "refersToVersion": version.id, "type": "suggestion",
                                "importance": 3, "comment": "Name the owner of the first action explicitly.",
                                "shortestSummary": "Name the first action's owner"})
        return {"reasoning": f"{len(reviews)} version(s) by others to review.", "reviews": reviews, "collabs": collabs}

    # -------------------------------------------------------------------- Watchdog

    def _inspect(self, facts: TurnFacts) -> dict:
        category = facts.focus[0] if facts.focus else "quality"  # a watchdog with a focus finds only its kind
        issue, recommendation = FINDINGS.get(category, FINDINGS["quality"])
        return {"reasoning": f"{len(facts.new_versions)} new version(s); no {category} finding is serious.",
                "inspections": [
            {"productId": version.product, "versionId": version.id, "assessment": "approved",
             "findings": [{"category": category, "severity": 2, "issue": issue, "recommendation": recommendation}]}
            for version in facts.new_versions
        ]}

    # ----------------------------------------------------------------------- Envoy

    def _presentation(self, facts: TurnFacts) -> dict:
        events: dict[str, list] = {}
        for event in facts.events:
            if event.agent in facts.speakers:
                events.setdefault(event.agent, []).append(event)
        messages = []
        roster = [agent for agent, _ in facts.team]
        for speaker in sorted(events, key=lambda agent: roster.index(agent) if agent in roster else len(roster))[:10]:
            done = events[speaker]
            if speaker == CHAIR_ID:
                accepted = sum(e.kind == "accepted" for e in done)
                assigned = sum(e.kind == "assigned" for e in done)
                parts = [f"accepted {count_of(accepted, 'product')}" if accepted else "",
                         f"gave out {count_of(assigned, 'assignment')}" if assigned else ""]
                content = (f"I {' and '.join(p for p in parts if p)} this round." if any(parts)
                           else "I checked where every product stands.")
            else:
                written = [_plain(e.subject, 60) for e in done if e.kind == "wrote"]
                content = (f"I wrote {count_of(len(written), 'new version')}: {', '.join(written)}"[:MESSAGE_CHARS].rstrip(", ")
                           + "." if written else "I worked on my products this round.")
            messages.append({"asAgent": speaker, "content": content})
        if not messages:
            speakers = list(facts.speakers)
            fallback = CHAIR_ID if CHAIR_ID in speakers else (speakers[0] if speakers else CHAIR_ID)
            messages.append({"asAgent": fallback, "content": "Nothing new was written this round."})
        return {"reasoning": "One message per agent who did something this round.", "messages": messages}


def _revised(facts: TurnFacts, parent: TreeProduct | None, answers: list[str]) -> dict:
    """The plan with the changes the user wrote at its sign-off, as a Chair applies them: each
    rename an UPDATE (with its definition of done), each removal a REMOVE, each addition an ADD
    under the Library. Nothing is assigned: the engine asks for the sign-off again first."""
    assert facts.plan_changes is not None, "only a change to the plan is revised"
    work = {p.name: p for p in facts.tree if p.type in WORK_TYPES and p.status != "removed"}
    change = plan_change(facts.plan_changes, tuple(work))
    operatives = facts.operatives() or ["operative-1"]
    asked = _plain(facts.plan_changes, 300)
    operations: list[dict] = [
        {"action": "UPDATE", "productId": work[old].id, "product": {"name": new, "dod": _definition(new, facts.request, answers)}}
        for old, new in change.renamed]
    operations += [{"action": "REMOVE", "productId": work[name].id, "reason": f"The user asked: {asked}"}
                   for name in change.removed]
    if parent is not None:
        operations += [{"action": "ADD", "newId": f"new-{index + 1}", "parentId": parent.id, "product": {
            "name": name, "type": "Content", "assignee": operatives[(len(work) + index) % len(operatives)],
            "dod": _definition(name, facts.plan_changes, answers)}} for index, name in enumerate(change.added)]
    applied = (f"{count_of(len(operations), 'change')} to the tree, as the user asked: {asked}" if operations
               else f"nothing I could apply to the tree from the user's words: {asked}")
    missing = f"; no product is named {_listed(change.unknown)}" if change.unknown else ""
    return {"thinking": {"roundStrategy": f"The plan's sign-off: {applied}{missing}.",
                         "acceptanceRationale": "Nothing is written yet."},
            "treeOperations": operations, "assignments": [], "acceptance": []}


def _mcp_tool(request: ModelRequest) -> dict | None:
    """The first tool of the mission's MCP servers the call offers (``server__tool``), if any."""
    return next((tool for tool in request.tools if isinstance(tool, dict) and TOOL_SEPARATOR in tool.get("name", "")),
                None)


def _tool_answer(request: ModelRequest) -> str | None:
    """What the turn's tool call answered (its first line of data, clipped), once it was made."""
    for message in request.messages:
        if isinstance(message, ToolMessage) and TOOL_SEPARATOR in str(message.content).split("\n", 1)[0]:
            lines = str(message.content).split("\n")
            data = lines[1] if message.status != "error" and len(lines) > 1 else "nothing usable"
            return _plain(data, 120)
    return None


def _tool_arguments(tool: dict, subject: str) -> dict:
    """Arguments for a tool from its schema: ``subject`` for each required text, 1 for a number, true for a flag."""
    schema = tool.get("input_schema") or {}
    samples = {"string": subject, "integer": 1, "number": 1, "boolean": True}
    arguments = {name: samples[kind] for name in schema.get("required") or ()
                 if (kind := (schema.get("properties") or {}).get(name, {}).get("type")) in samples}
    return {**arguments, "why": f"To ground the version of {subject} in what the tool knows."}


def _requested_context(messages: tuple) -> str | None:
    """The text of the context this turn already requested (a tool result), or None."""
    for message in messages:
        if isinstance(message, ToolMessage) and str(message.content).startswith(REQUESTED_CONTEXT):
            return str(message.content)
    return None


def _source_requests(facts: TurnFacts) -> list[dict]:
    """Read the first source, and search the sources for the first assignment's words."""
    product = facts.assignments[0].product
    return [{"need": "source", "sourceId": facts.sources[0].id, "reason": "The user's material comes first."},
            {"need": "search_sources", "query": f"{product.name} {facts.request}"[:200],
             "reason": f"What the sources say about {product.name}."}]


def _container(tree: list[TreeProduct]) -> TreeProduct | None:
    """Where new Content goes: a Collection, else any product that may hold Content."""
    return next((p for p in tree if p.type == "Collection" and p.status != "removed"), None) or \
        next((p for p in tree if p.type in CONTAINER_TYPES and p.status != "removed"), None)


def _assignment(product_id: str, assignee: str, name: str, version: int | None, round_number: int,
                word: str | None = None) -> dict:
    """An assignment; ``word`` (the user's direction or message) goes in its context, for the writer to take up."""
    directive = {
        "objective": f"Write {'the first' if not version else 'the next'} version of {name}.",
        "dod": "The product's definition of done.",
        "why": f"It is open work for round {round_number}.",
        "importance": 6,
    }
    return {"productId": product_id, "assignee": assignee, "directive": {**directive, "context": word} if word else directive}


def _definition(name: str, asked: str, answers: list[str], *, named: bool = True) -> str:
    """A product's definition of done: what it is for, in the words that asked for it (``named``:
    the words name it; else it is one of the products any request needs)."""
    kept = "".join(f" It keeps to the user's answer: {_plain(answer, 200)}." for answer in answers[:2])
    asked = _clip(" ".join(asked.split()), 400).replace('"', "'")
    what = f"The {name[:1].lower() + name[1:]} " + ("the user asked for in" if named else "that answers")
    return _clip(f"{what}: \"{asked}\" Done when the user can act on it without asking back.{kept}", 1000)


def _owners(facts: TurnFacts, new: list[tuple[str, str, str]]) -> list[dict]:
    """The owners of the products a plan adds, as a decision of the record: decided at the first
    such plan, changed (the same id) at each later one."""
    if not new:
        return []
    kept = next((d for d in facts.decisions if d.topic == OWNERS), None)
    owners = "; ".join(f"{name}: {owner}" for name, _, owner in new)
    if kept is None:
        return [{"topic": OWNERS, "decision": _clip(owners, 600), "why": "One owner per product."}]
    return [{"replaces": kept.id, "topic": OWNERS, "decision": _clip(f"{kept.decision}; {owners}", 600),
             "why": f"Round {facts.round} added products."}]


def _listed(names: tuple[str, ...]) -> str:
    """"A, B and C"."""
    return " and ".join(filter(None, (", ".join(names[:-1]), names[-1]))) if names else "the request"


def _clip(text: str, limit: int) -> str:
    """At most ``limit`` characters, cut at a word."""
    return text if len(text) <= limit else text[: limit - 1].rsplit(" ", 1)[0] + "…"


@dataclass(frozen=True)
class Quote:
    """A sentence of the user's material and the reference that cites it (``[[s:s1#2]]``)."""

    text: str
    ref: str


def _quote(served: str) -> Quote | None:
    """The first sentence of the best section the served context holds: the search's first
    hit, else the source read's first section (each is a ``[[s:..]] (heading)`` line, then
    ``> `` lines that start with the heading)."""
    read, _, searched = served.partition("### search")
    for part in (searched, read):
        ref, heading = None, ""
        lines: list[str] = []
        for line in part.splitlines():
            if line.startswith("[[s:") and not "".join(lines).strip():
                found = parse_refs(line)
                ref = found[0].render() if found else None
                heading = line.partition("(")[2].rpartition(")")[0]
                lines = []
            elif line.startswith(">") and ref is not None:
                lines.append(line[2:])
            elif lines:
                break
        text = " ".join(" ".join(lines).replace("[[", "").replace("]]", "").split())
        text = re.sub(r"^(?:#+\s*" + re.escape(heading) + r"\s*)?(?:[-*+]\s+)?", "", text)  # its heading, a bullet
        if ref is not None and text:
            sentence = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0]
            return Quote(_clip(sentence, QUOTE_CHARS).replace('"', "'"), ref)
    return None


# ------------------------------------------------------------- calls outside the round


def baseline_answer(request: ModelRequest, facts: BaselineFacts) -> dict:
    """The one call of a baseline: the first offered tool once, when there is one; then one
    document per deliverable the request names, each saying what it is for, quoting the first
    section of the user's files the prompt shows and what the tool answered."""
    offered, answered = _mcp_tool(request), _tool_answer(request)
    names = deliverables(facts.request)
    if offered is not None and answered is None:
        return {"tool": offered["name"], "args": _tool_arguments(offered, names[0])}
    prompt = "\n".join(str(m.content) for m in request.messages if m.type == "human")
    sections = re.split(r"\n(?=\[\[s:)", prompt.partition("## The user's files")[2]) if facts.sources else []
    quote = next((found for section in sections[1:] if (found := _quote(section)) is not None), None)
    documents = []
    for name in names:
        parts = [f"# {name}", "", f"What it is for: {_clip(facts.request, 300)}"]
        parts += [f"What the user told us: {answer}" for answer in facts.answers]
        if quote is not None:
            parts.append(f"The user's files say: \"{quote.text}\" {quote.ref}")
        if answered:
            parts.append(f"A tool answered: {answered}.")
        parts += ["", "- Who uses it, and when", "- What it gives them", "- The first step, its owner and its day"]
        documents.append({"name": name, "content": _clip("\n".join(parts), CONTENT_CHARS)})
    return {"tool": "final_output", "args": {"documents": documents}}


def comparison_answer(facts: ComparisonFacts) -> dict:
    """A judge's verdicts that do not depend on the order the sets are shown in: per deliverable,
    the document that uses more of the request's own words (a document against none wins; equal
    counts tie), and overall the side that won more deliverables."""
    asked = {word for word in re.findall(r"[a-z]{4,}", facts.request.lower())}

    def merit(index: int | None, side: tuple) -> int:
        return -1 if index is None else len(asked & set(re.findall(r"[a-z]{4,}", side[index].text.lower())))

    verdicts = []
    for number, (first, second) in enumerate(facts.pairs, 1):
        x, y = merit(first, facts.first), merit(second, facts.second)
        better = "X" if x > y else "Y" if y > x else "tie"
        verdicts.append({"deliverable": number, "better": better,
                         "reason": f"X uses {max(x, 0)} of the request's words, Y {max(y, 0)}."})
    wins = {side: sum(v["better"] == side for v in verdicts) for side in ("X", "Y")}
    overall = "X" if wins["X"] > wins["Y"] else "Y" if wins["Y"] > wins["X"] else "tie"
    score = {"faithful": 5, "practical": 5, "complete": 5, "clear": 5, "consistent": 5}
    return {"deliverables": verdicts, "overall": overall, "confidence": "low",
            "overallReason": f"X won {wins['X']} deliverable(s), Y {wins['Y']}.", "scores": {"X": score, "Y": score}}


# ------------------------------------------------------------------------------ factories


def simulated_team(*, latency_s: float = 0.0, initial_products: int | None = None, products_per_round: int = 0,
                   done_at_round: int | None = None, collab_every: int = 3) -> FunctionChatModel:
    """A chat model that plays the whole team (see the module docstring).

    ``initial_products``: the Library and the products round 1 adds under it, counted together
    (None: one product per deliverable the request names, ``deliverables``);
    ``products_per_round``: Content products the Chair adds every round (the tree grows);
    ``done_at_round``: the round whose Plan & Assign halts ``done`` (None: never on purpose);
    ``latency_s``: seconds each call sleeps, standing in for a real model.
    """
    fn = SimulatedTeam(initial_products=initial_products, products_per_round=products_per_round,
                       done_at_round=done_at_round, collab_every=collab_every)
    return FunctionChatModel(fn, latency_s=latency_s)


def team(**options: Any) -> FunctionChatModel:
    """The default simulated team, for ``--model py:cabal.rounds.simulated:team``."""
    return simulated_team(**options)
