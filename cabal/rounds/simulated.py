"""A simulated team: a model that plays every role with valid, minimal, meaningful answers.

Like pydantic-ai's ``TestModel``, but aware of Cabal's rules: it reads the facts of each turn
(``ModelRequest.facts``, the ``TurnFacts`` the prompt was written from, with its short ids
``p1``/``v1``/``c1``) and answers what a diligent team would, so a mission runs offline for any
number of rounds without a script.

    cabal run mission.yaml --model py:cabal.rounds.simulated:team

What each role does:

- Chair, Bootstrap: a charter from the request, a persona and a domain per agent, and
  ``initial_products`` products spread over the operatives: a ``Collection`` (the container
  later rounds grow) and ``Content`` products.
- Chair, Plan & Assign: accepts every product whose latest version passed inspection and whose
  owner reflected ``met``; ADDs ``products_per_round`` new ``Content`` products under a
  Collection; assigns each open work product without an approved latest version to its owner.
  It halts ``done`` in round ``done_at_round`` (if given), or when every work product is
  accepted and nothing is left to add. Given a new direction (a mission continued after it
  ended), it reopens the first accepted work product with an UPDATE and assigns it again.
- Chair, Closing decisions (the last round, after Inspect): accepts each version that passed
  inspection without blocking feedback; halts ``done`` when nothing awaits a decision.
- Operatives: Reflect ``met`` on products whose latest version is approved, else ``not_met``,
  answering every open collab they are shown; Write a 300-600 character version of each
  assignment; Peer Review approves every version shown, with a suggestion now and then.
  When the mission has sources, a writer first requests the first source and searches the
  sources for its product's words, then cites the source and the best section found as
  ``[[s:...]]`` in each version. When a tool of the mission's MCP servers is offered, a writer
  calls the first one once (the assignment's name for each required text argument) and quotes
  its answer in each version.
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
from cabal.rounds.facts import TreeProduct, TurnFacts
from cabal.tools.spec import SEPARATOR as TOOL_SEPARATOR
from cabal.vocabulary import CHAIR_ID

CONTAINER_TYPES = ("Collection", "Orchestration", "Decision")  # may hold Content
WORK_TYPES = ("Content", "Decision")  # get versions; Collection/Orchestration only structure
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
    """A name fit for a one-sentence message: no sentence punctuation, clipped."""
    text = re.sub(r"[.!?]+", "", " ".join(text.split()))
    return text[:limit]


@dataclass
class SimulatedTeam:
    """``fn(request)`` for ``FunctionChatModel``: every role, every step."""

    initial_products: int = 6
    products_per_round: int = 0
    done_at_round: int | None = None
    collab_every: int = 3  # a peer review adds a suggestion to about one version in this many

    def __call__(self, request: ModelRequest) -> dict:
        facts = request.facts
        if not isinstance(facts, TurnFacts):
            raise ModelError("the simulated team plays Cabal missions: the call carries no turn facts "
                             "(it is only answered inside the round engine)", provider="simulated")
        if facts.step == "write" and facts.assignments:
            cited: tuple[str, ...] = ()
            if facts.sources:
                read = _requested_context(request.messages)
                if read is None:
                    return {"tool": "request_context", "args": {"requests": _source_requests(facts)}}
                searched = read.split("### search", 1)[-1]  # the search's best section, not the source read whole
                found = [r.render() for r in parse_refs(searched) if r.kind == "s" and "#" in r.id]
                cited = (f"[[s:{facts.sources[0].id}]]", *found[:1])
            offered, quoted = _mcp_tool(request), _tool_answer(request)
            if offered is not None and quoted is None:
                return {"tool": offered["name"], "args": _tool_arguments(offered, facts.assignments[0].product.name)}
            return {"tool": "final_output", "args": self._write(facts, cited=cited, quoted=quoted)}
        answer = getattr(self, f"_{facts.step}")(facts)
        return {"tool": answer[0], "args": answer[1]} if isinstance(answer, tuple) else {"tool": "final_output", "args": answer}

    # -------------------------------------------------------------------- the Chair

    def _bootstrap(self, facts: TurnFacts) -> dict:
        operatives = facts.operatives() or ["operative-1"]
        request = " ".join((facts.request or "the user's request").split())
        subject = request[:160]
        products = [{
            "name": "Library", "type": "Collection", "owner": operatives[0],
            "dod": "Holds every content product of the mission, each accepted on its own.",
        }]
        for index in range(max(0, self.initial_products - 1)):
            topic = TOPICS[index % len(TOPICS)]
            name = f"{topic.capitalize()} {index + 1}"
            products.append({"name": name, "type": "Content", "owner": operatives[index % len(operatives)],
                             "dod": f"A complete {topic} section for the mission, concrete enough to act on, "
                                    f"with at least two specific points."})
        return {
            "thinking": {"interpretation": f"The user asks: {subject}",
                         "scopeDecisions": f"Start with {len(products)} products; grow the library as rounds show gaps."},
            "mission": f"Deliver what the user asked for as a set of accepted content products: {request}"[:2000],
            "objectives": ["Every product meets its definition of done and passes inspection",
                           "Each round ends with accepted work the user can read"],
            "constraints": ["Plain text only", "One owner per product"],
            "personas": {a: f"A careful {role} who keeps work small and checkable" for a, role in facts.team},
            "operativeDomains": {op: {"responsibility": f"Products assigned to {op}", "area": f"area {n + 1}"}
                                 for n, op in enumerate(operatives)},
            "initialProducts": products,
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
        reopened = next((p for p in tree if p.status == "accepted" and p.type in WORK_TYPES), None) \
            if facts.direction else None
        if not self.products_per_round and tree and not open_work and reopened is None:
            return "halt", {"type": "done", "to": ["u:all"], "message": "Every product is accepted; the mission is met."}

        assignments, operations = [], []
        if reopened is not None and facts.direction:  # the user's new direction changes the first accepted product
            owner = reopened.owner if reopened.owner in operatives else operatives[0]
            operations.append({"action": "UPDATE", "productId": reopened.id,
                               "product": {"description": f"Reworked for the user's new direction: "
                                                          f"{_plain(facts.direction, 300)}"}})
            assignments.append(_assignment(reopened.id, owner, reopened.name, reopened.version, round_number))
        for product in open_work:
            if product.id in approved:  # passed inspection: accepted now, or waiting for its owner's word
                continue
            owner = product.owner if product.owner in operatives else operatives[0]
            assignments.append(_assignment(product.id, owner, product.name, product.version, round_number))
        parent = _container(tree)
        if parent is not None:
            for index in range(self.products_per_round):
                new_id = f"new-{index + 1}"
                owner = operatives[(round_number * self.products_per_round + index) % len(operatives)]
                topic = TOPICS[(round_number + index) % len(TOPICS)]
                name = f"{topic.capitalize()} r{round_number}-{index + 1}"
                operations.append({"action": "ADD", "newId": new_id, "parentId": parent.id, "product": {
                    "name": name, "type": "Content", "assignee": owner,
                    "dod": f"A complete {topic} section added in round {round_number}, with two specific points.",
                }})
                assignments.append(_assignment(new_id, owner, name, None, round_number))
        return {
            "thinking": {
                "roundStrategy": f"Round {round_number}: {len(assignments)} assignment(s), "
                                 f"{len(operations)} new product(s).",
                "acceptanceRationale": (f"Accepting {len(acceptance)} product(s) whose latest version passed "
                                        "inspection and whose owner reports the DoD met." if acceptance
                                        else "Nothing is ready to accept yet."),
            },
            "treeOperations": operations,
            "assignments": assignments,
            "acceptance": acceptance,
        }

    def _close(self, facts: TurnFacts) -> dict | tuple[str, dict]:
        """The last round's closing decisions: accept each version that passed inspection without
        blocking feedback (this round's on the Chair's own judgement, older ones on a ``met``)."""
        if not facts.candidates:
            return "halt", {"type": "done", "to": ["u:all"], "message": "Every product is accepted; the mission is met."}
        written_now = {v.id for v in facts.new_versions}
        met = {r.product for r in facts.reflections if r.dod_status == "met"}
        acceptance = [{"productId": c.product, "accepted": True, "versionId": c.version} for c in facts.candidates
                      if c.verdict == "approved" and not c.blocking and (c.version in written_now or c.product in met)]
        return {"reasoning": f"The last round: {len(acceptance)} version(s) passed inspection without blocking "
                             "feedback, so I accept them.", "acceptance": acceptance}

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

    def _write(self, facts: TurnFacts, cited: tuple[str, ...] = (), quoted: str | None = None) -> dict:
        versions = []
        for assignment in facts.assignments:
            product = assignment.product
            number = product.latest.number + 1 if product.latest else 1
            content = (
                f"{product.name}, version {number}, written by {facts.agent} in round {facts.round} for "
                f"[[p:{product.id}]]. " + (f"From the user's material: {' and '.join(cited)}. " if cited else "")
                + (f"A tool answered: {quoted} " if quoted else "")
                + f"Objective: {assignment.objective or 'the directive'} "
                f"What it covers: {product.dod or 'the definition of done'} "
                f"Point one: the section states who it serves and what they get, in one concrete sentence. "
                f"Point two: it lists the first action, its owner and the day it happens."
            )
            while len(content) < 300:
                content += " It stays plain text and short enough to review in one reading."
            if len(content) > 600:
                content = content[:600].rsplit(" ", 1)[0]
            versions.append({"productId": product.id, "newVersion": {
                "contentTitle": f"{product.name} v{number}"[:200], "content": content,
                "changeSummary": "First version." if number == 1 else f"Version {number}: answers the inspection and the feedback.",
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
                parts = [f"accepted {accepted} product(s)" if accepted else "",
                         f"made {assigned} assignment(s)" if assigned else ""]
                content = f"I {' and '.join(p for p in parts if p) or 'planned the round'} this round."
            else:
                written = [_plain(e.subject, 60) for e in done if e.kind == "wrote"]
                content = (f"I wrote {len(written)} new version(s) this round: {', '.join(written)}"[:MESSAGE_CHARS].rstrip(", ")
                           + "." if written else "I worked on my products this round.")
            messages.append({"asAgent": speaker, "content": content})
        if not messages:
            speakers = list(facts.speakers)
            fallback = CHAIR_ID if CHAIR_ID in speakers else (speakers[0] if speakers else CHAIR_ID)
            messages.append({"asAgent": fallback, "content": "Nothing new was written this round."})
        return {"reasoning": "One message per agent who did something this round.", "messages": messages}


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


def _assignment(product_id: str, assignee: str, name: str, version: int | None, round_number: int) -> dict:
    return {"productId": product_id, "assignee": assignee, "directive": {
        "objective": f"Write {'the first' if not version else 'the next'} version of {name}.",
        "dod": "The product's definition of done.",
        "why": f"It is open work for round {round_number}.",
        "importance": 6,
    }}


# ------------------------------------------------------------------------------ factories


def simulated_team(*, latency_s: float = 0.0, initial_products: int = 6, products_per_round: int = 0,
                   done_at_round: int | None = None, collab_every: int = 3) -> FunctionChatModel:
    """A chat model that plays the whole team (see the module docstring).

    ``initial_products``: products created at bootstrap, the Collection included;
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
