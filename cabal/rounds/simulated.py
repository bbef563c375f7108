"""A simulated team: a model that plays every role with valid, minimal, meaningful answers.

Like pydantic-ai's ``TestModel``, but aware of Cabal's rules: it reads the prompt each call
is given (the product tree, the step's detail sections, the short ids ``p1``/``v1``/``c1``)
and answers what a diligent team would, so a mission runs offline for any number of rounds
without a script.

    cabal run mission.yaml --model py:cabal.rounds.simulated:team

What each role does:

- Chair, Bootstrap: a charter from the request, a persona and a domain per agent, and
  ``initial_products`` products spread over the operatives: a ``Collection`` (the container
  later rounds grow) and ``Content`` products.
- Chair, Plan & Assign: accepts every product whose latest version passed inspection and whose
  owner reflected ``met``; ADDs ``products_per_round`` new ``Content`` products under a
  Collection; assigns each open work product without an approved latest version to its owner.
  It halts ``done`` in round ``done_at_round`` (if given), or when every work product is
  accepted and nothing is left to add.
- Operatives: Reflect ``met`` on products whose latest version is approved, else ``not_met``,
  answering every open collab they are shown; Write a 300-600 character version of each
  assignment; Peer Review approves every version shown, with a suggestion now and then.
- Watchdog: inspects every new version: ``approved``, with one minor finding.
- Envoy: one message per speaker who did something this round.

The parsing is tolerant on purpose: a line it cannot read is skipped, never an error.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage

from cabal.llm.keys import AGENT_KEY, ROUND_KEY, STEP_KEY
from cabal.llm.scripted import FunctionChatModel

CONTAINER_TYPES = ("Collection", "Orchestration", "Decision")  # may hold Content
WORK_TYPES = ("Content", "Decision")  # get versions; Collection/Orchestration only structure
TOPICS = ("overview", "audience", "requirements", "risks", "timeline", "budget", "operations",
          "support", "metrics", "communication", "security", "rollout")
MESSAGE_CHARS = 400

_TREE_LINE = re.compile(
    r"^(?P<indent>\s*)(?P<id>p\d+) \[(?P<type>\w+)\] (?P<name>.*?) · owner (?P<owner>\S+) · "
    r"(?P<status>\w+) · (?:v(?P<number>\d+)|no version)(?: · (?P<collabs>\d+) open collab)?")
_HEADING = re.compile(r"^### (?P<id>p\d+) (?P<name>.*) \[(?P<type>\w+)\]\s*$")
_VERSION_HEAD = re.compile(r"^(?P<vid>v\d+): v(?P<number>\d+) of (?P<pid>p\d+) by (?P<author>\S+)")
_COLLAB_LINE = re.compile(r"^- (?P<cid>c\d+) on (?P<pid>p\d+) \[")
_REFLECTION = re.compile(r"^- (?P<author>\S+) on (?P<pid>p\d+): DoD (?P<status>\w+)")
_CANDIDATE = re.compile(r"^- (?P<pid>p\d+) (?P<name>.*): latest (?P<vid>v\d+) \(v\d+\), inspection (?P<verdict>[\w ]+?)"
                        r"(?:, (?P<blocking>\d+) blocking collab)?\s*$")
_EVENT_AUTHOR = re.compile(r"^- (?P<agent>chair-1|operative-\d+) ")
_OPERATIVE = re.compile(r"\b(operative-\d+)\b")


# ------------------------------------------------------------------------------ reading


def message_text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(b if isinstance(b, str) else str(b.get("text", "")) for b in content if isinstance(b, (str, dict)))


def sections(text: str) -> dict[str, str]:
    """``## Title`` sections of a prompt, by title (the part before any parenthesis)."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("## "):
            title = line[3:].split("(")[0].strip()
            current = found.setdefault(title, [])
        elif current is not None:
            current.append(line)
    return {title: "\n".join(lines) for title, lines in found.items()}


@dataclass
class TreeProduct:
    id: str
    type: str
    name: str
    owner: str
    status: str
    version: int  # 0: no version yet
    depth: int


def tree_of(text: str) -> list[TreeProduct]:
    products = []
    for line in sections(text).get("Product tree", "").splitlines():
        match = _TREE_LINE.match(line)
        if match:
            products.append(TreeProduct(match["id"], match["type"], match["name"], match["owner"], match["status"],
                                        int(match["number"] or 0), len(match["indent"]) // 2))
    return products


@dataclass
class ProductBlock:
    """A ``### p1 Name [Type]`` block of a detail section."""

    id: str
    name: str
    type: str
    lines: list[str] = field(default_factory=list)

    def first(self, prefix: str) -> str:
        return next((line[len(prefix):].strip() for line in self.lines if line.startswith(prefix)), "")

    @property
    def version(self) -> re.Match | None:
        return next((m for m in map(_VERSION_HEAD.match, self.lines) if m), None)

    @property
    def inspection(self) -> str:
        return self.first("Inspection:")

    @property
    def open_collabs(self) -> list[str]:
        return [m["cid"] for m in map(_COLLAB_LINE.match, self.lines) if m and m["pid"] == self.id]


def product_blocks(section: str) -> list[ProductBlock]:
    blocks: list[ProductBlock] = []
    for line in section.splitlines():
        heading = _HEADING.match(line)
        if heading:
            blocks.append(ProductBlock(heading["id"], heading["name"], heading["type"]))
        elif line.startswith("Attached: "):
            blocks.append(ProductBlock("", "", ""))  # attached context: read, never written to
        elif blocks:
            blocks[-1].lines.append(line)
    return [b for b in blocks if b.id]


def version_heads(section: str) -> list[re.Match]:
    return [m for m in map(_VERSION_HEAD.match, section.splitlines()) if m]


def _stable(*parts: Any) -> int:
    return zlib.crc32("|".join(map(str, parts)).encode())


def _plain(text: str, limit: int = 80) -> str:
    """A name fit for a one-sentence message: no sentence punctuation, clipped."""
    text = re.sub(r"[.!?]+", "", " ".join(text.split()))
    return text[:limit]


# ------------------------------------------------------------------------------ the team


@dataclass
class SimulatedTeam:
    """``fn(messages, tools, metadata)`` for ``FunctionChatModel``: every role, every step."""

    initial_products: int = 6
    products_per_round: int = 0
    done_at_round: int | None = None
    collab_every: int = 3  # a peer review adds a suggestion to about one version in this many

    def __call__(self, messages: list[BaseMessage], tools: list[Any], metadata: Mapping[str, Any]) -> dict:
        user = next((message_text(m) for m in messages if isinstance(m, HumanMessage)), "")
        system = next((message_text(m) for m in messages if isinstance(m, SystemMessage)), "")
        step = str(metadata.get(STEP_KEY) or _step_from_system(system))
        agent = str(metadata.get(AGENT_KEY) or "")
        round_number = int(metadata.get(ROUND_KEY) or _round_from_prompt(user))
        # Context served mid-step (request_context) is read like the prompt itself.
        served = "\n".join(message_text(m) for m in messages if isinstance(m, ToolMessage)
                           and message_text(m).startswith("REQUESTED CONTEXT"))
        answer = getattr(self, f"_{step}")(user + ("\n" + served if served else ""), agent, round_number)
        return {"tool": answer[0], "args": answer[1]} if isinstance(answer, tuple) else {"tool": "final_output", "args": answer}

    # -------------------------------------------------------------------- the Chair

    def _bootstrap(self, prompt: str, agent: str, round_number: int) -> dict:
        parts = sections(prompt)
        team = re.findall(r"^- (\S+) \((\w+)\)", parts.get("The team", ""), flags=re.M)
        operatives = [a for a, role in team if role == "operative"] or ["operative-1"]
        request = " ".join((parts.get("The user's request") or "the user's request").split())
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
            "personas": {a: f"A careful {role} who keeps work small and checkable" for a, role in team} or
                        {"chair-1": "A careful chair"},
            "operativeDomains": {op: {"responsibility": f"Products assigned to {op}", "area": f"area {n + 1}"}
                                 for n, op in enumerate(operatives)},
            "initialProducts": products,
        }

    def _plan(self, prompt: str, agent: str, round_number: int) -> dict | tuple[str, dict]:
        parts = sections(prompt)
        tree = tree_of(prompt)
        operatives = sorted(set(_OPERATIVE.findall(parts.get("Operatives", ""))), key=_agent_order) or \
            sorted({p.owner for p in tree if p.owner.startswith("operative-")}, key=_agent_order) or ["operative-1"]
        met = {m["pid"] for m in map(_REFLECTION.match, parts.get("Reflections this round", "").splitlines())
               if m and m["status"] == "met"}
        candidates = [m for m in map(_CANDIDATE.match, parts.get("Versions awaiting a decision", "").splitlines()) if m]
        approved = {m["pid"] for m in candidates if m["verdict"].strip() == "approved"}
        acceptance = [{"productId": m["pid"], "accepted": True, "versionId": m["vid"]} for m in candidates
                      if m["pid"] in approved and m["pid"] in met and not m["blocking"]]
        open_work = [p for p in tree if p.status == "open" and p.type in WORK_TYPES]
        if self.done_at_round is not None and round_number >= self.done_at_round:
            return "halt", {"type": "done", "to": ["u:all"],
                            "message": f"The team stops after {round_number - 1} round(s), as planned."}
        if not self.products_per_round and tree and not open_work:
            return "halt", {"type": "done", "to": ["u:all"], "message": "Every product is accepted; the mission is met."}

        assignments = []
        for product in open_work:
            if product.id in approved:  # passed inspection: accepted now, or waiting for its owner's word
                continue
            owner = product.owner if product.owner.startswith("operative-") else operatives[0]
            assignments.append(_assignment(product.id, owner, product.name, product.version, round_number))
        operations = []
        parent = next((p for p in tree if p.type == "Collection" and p.status != "removed"), None) or \
            next((p for p in tree if p.type in CONTAINER_TYPES and p.status != "removed"), None)
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
                assignments.append(_assignment(new_id, owner, name, 0, round_number))
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

    # ------------------------------------------------------------------- Operatives

    def _reflect(self, prompt: str, agent: str, round_number: int) -> dict:
        reflections = []
        for block in product_blocks(sections(prompt).get("Your products", "")):
            if block.type not in WORK_TYPES and block.version is None and not block.open_collabs:
                continue  # a container (the Library): nothing to reflect on
            done = block.inspection == "approved"
            reflections.append({
                "refersToProduct": block.id,
                "dodStatus": "met" if done else "not_met",
                "feedbackResponses": [{"collabId": c, "action": "accept", "rationale": "It makes the product clearer.",
                                       "plannedChange": "Fold it into the next version."} for c in block.open_collabs],
                "nextVersionDelta": "None; ready for acceptance." if done else
                                    ("Write the first version." if block.version is None else
                                     "Answer the inspection and the feedback in a new version."),
            })
        return {"reflections": reflections}

    def _write(self, prompt: str, agent: str, round_number: int) -> dict:
        versions = []
        for block in product_blocks(sections(prompt).get("Your assignments this round", "")):
            previous = block.version
            number = int(previous["number"]) + 1 if previous else 1
            dod = block.first("DoD:") or "the definition of done"
            objective = block.first("Directive").split(":", 1)[-1].strip() or "the directive"
            content = (
                f"{block.name}, version {number}, written by {agent} in round {round_number} for [[p:{block.id}]]. "
                f"Objective: {objective} "
                f"What it covers: {dod} "
                f"Point one: the section states who it serves and what they get, in one concrete sentence. "
                f"Point two: it lists the first action, its owner and the day it happens."
            )
            while len(content) < 300:
                content += " It stays plain text and short enough to review in one reading."
            if len(content) > 600:
                content = content[:600].rsplit(" ", 1)[0]
            versions.append({"productId": block.id, "newVersion": {
                "contentTitle": f"{block.name} v{number}"[:200], "content": content,
                "changeSummary": "First version." if number == 1 else f"Version {number}: answers the inspection and the feedback.",
            }})
        return {"versions": versions}

    def _peer_review(self, prompt: str, agent: str, round_number: int) -> dict:
        reviews, collabs = [], []
        for head in version_heads(sections(prompt).get("New versions to review", "")):
            reviews.append({"productId": head["pid"], "versionId": head["vid"], "assessment": "approved",
                            "summary": "Meets its definition of done; clear and concrete."})
            if self.collab_every and _stable(round_number, agent, head["pid"]) % self.collab_every == 0:
                collabs.append({"refersToProduct": head["pid"], "refersToVersion": head["vid"], "type": "suggestion",
                                "importance": 3, "comment": "Name the owner of the first action explicitly.",
                                "shortestSummary": "Name the first action's owner"})
        return {"reviews": reviews, "collabs": collabs}

    # -------------------------------------------------------------------- Watchdog

    def _inspect(self, prompt: str, agent: str, round_number: int) -> dict:
        seen: set[str] = set()
        inspections = []
        parts = sections(prompt)
        text = "\n".join(body for title, body in parts.items() if title.startswith("New versions to inspect"))
        for head in version_heads(text):
            if head["vid"] in seen:
                continue
            seen.add(head["vid"])
            inspections.append({"productId": head["pid"], "versionId": head["vid"], "assessment": "approved",
                                "findings": [{"category": "quality", "severity": 2,
                                              "issue": "One sentence could be shorter.",
                                              "recommendation": "Tighten it in a later version."}]})
        return {"inspections": inspections}

    # ----------------------------------------------------------------------- Envoy

    def _presentation(self, prompt: str, agent: str, round_number: int) -> dict:
        parts = sections(prompt)
        speakers_line = next((line for line in prompt.splitlines() if line.startswith("You may speak as:")), "")
        speakers = [s.strip(" .") for s in speakers_line.removeprefix("You may speak as:").split(",") if s.strip(" .")]
        events: dict[str, list[str]] = {}
        for line in parts.get("What happened this round", "").splitlines():
            match = _EVENT_AUTHOR.match(line)
            if match and match["agent"] in speakers:
                events.setdefault(match["agent"], []).append(line[2:])
        messages = []
        for speaker in sorted(events, key=_agent_order)[:10]:
            lines = events[speaker]
            if speaker == "chair-1":
                accepted = sum(" accepted " in f" {e} " for e in lines)
                assigned = sum(" assigned " in f" {e} " for e in lines)
                done = [f"accepted {accepted} product(s)" if accepted else "",
                        f"made {assigned} assignment(s)" if assigned else ""]
                content = f"I {' and '.join(d for d in done if d) or 'planned the round'} this round."
            else:
                written = [_plain(e.split(" of ", 1)[-1].split(":", 1)[0], 60) for e in lines if " wrote " in e]
                content = (f"I wrote {len(written)} new version(s) this round: {', '.join(written)}"[:MESSAGE_CHARS].rstrip(", ")
                           + "." if written else "I worked on my products this round.")
            messages.append({"asAgent": speaker, "content": content})
        if not messages:
            fallback = "chair-1" if "chair-1" in speakers else (speakers[0] if speakers else "chair-1")
            messages.append({"asAgent": fallback, "content": "Nothing new was written this round."})
        return {"messages": messages}


def _assignment(product_id: str, assignee: str, name: str, version: int, round_number: int) -> dict:
    return {"productId": product_id, "assignee": assignee, "directive": {
        "objective": f"Write {'the first' if not version else 'the next'} version of {name}.",
        "dod": "The product's definition of done.",
        "why": f"It is open work for round {round_number}.",
        "importance": 6,
    }}


def _agent_order(agent_id: str) -> tuple[int, int]:
    if agent_id == "chair-1":
        return (0, 0)
    number = agent_id.rsplit("-", 1)[-1]
    return (1, int(number) if number.isdigit() else 0)


def _step_from_system(system: str) -> str:
    match = re.search(r"Your step now: (.+)", system)
    titles = {"Bootstrap": "bootstrap", "Reflect": "reflect", "Plan & Assign": "plan", "Write": "write",
              "Peer Review": "peer_review", "Inspect": "inspect", "Presentation": "presentation"}
    title = (match[1] if match else "").split(" (")[0].strip()
    return titles.get(title, "presentation")


def _round_from_prompt(user: str) -> int:
    match = re.match(r"# Round (\d+)", user)
    return int(match[1]) if match else 0


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
