"""The rules the engine enforces; the model only proposes.

Each rule named in a role card's ``about:`` is a pure function of one answer item and the
step's ``RuleContext``, returning the problems it finds (plain sentences). The engine prefixes
them with the item's path and sends them all back to the model at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from cabal.entities import (
    AddProduct,
    Assignment,
    Acceptance,
    ChairVersion,
    Collab,
    Decision,
    FeedbackResponse,
    InitialProduct,
    Inspection,
    Message,
    MoveProduct,
    ProductType,
    Reflection,
    Remark,
    RemoveProduct,
    Review,
    UpdateProduct,
    VersionWrite,
)
from cabal.rounds.snapshot import Snapshot
from cabal.vocabulary import USER_ID, Role, Step


class TeamMember(Protocol):
    """What the rules read of one agent (``rounds.team.Agent`` is one)."""

    @property
    def focus(self) -> tuple[str, ...]: ...


class Roster(Protocol):
    """What the rules read of the team (``rounds.team.Team`` is one). A protocol, not the class:
    the team's cards name these rules (team.py imports ``ABOUT_RULES``), so this module never
    imports team.py, and the two do not import each other."""

    def get(self, agent_id: str) -> TeamMember | None: ...

    def ids(self, role: Role | None = None) -> list[str]: ...

    def speakers(self, agent_id: str) -> list[str]: ...

CLOSED_STATUSES = ("accepted", "removed")


@dataclass
class RuleContext:
    """What the rules of one turn know: the snapshot, the team, who is answering.

    ``added`` collects the products an answer's ADD operations create (``new-N`` ->
    {name, type, parent_id}), so later items of the same answer can use them; ``reopened`` the
    accepted products its UPDATEs reopen (an UPDATE of an accepted product makes it open again),
    so later items may assign them; ``decided`` the topics of its new decisions, which take the
    record's next ids in that order.
    """

    snapshot: Snapshot
    team: Roster
    agent_id: str
    added: dict[str, dict] = field(default_factory=dict)
    reopened: dict[str, dict] = field(default_factory=dict)
    seen: set[tuple[str, str]] = field(default_factory=set)
    decided: list[str] = field(default_factory=list)  # the topics of the answer's new decisions, in order

    def once(self, kind: str, key: str) -> bool:
        """True the first time (kind, key) is seen in this answer."""
        if (kind, key) in self.seen:
            return False
        self.seen.add((kind, key))
        return True

    def product(self, product_id: str) -> dict | None:
        """A live product, or one added earlier in this answer."""
        if product_id in self.added or product_id in self.reopened:
            return self.added.get(product_id) or self.reopened[product_id]
        product = self.snapshot.products.get(product_id)
        return product if product and product.get("status") != "removed" else None

    def children_names(self, parent_id: str | None) -> set[str]:
        names = {p["name"].casefold() for p in self.snapshot.live_products() if p.get("parent_id") == parent_id}
        names |= {p["name"].casefold() for p in self.added.values() if p.get("parent_id") == parent_id}
        return names


Rule = Callable[[Any, RuleContext], list[str]]


def _operative(agent_id: str | None, ctx: RuleContext) -> list[str]:
    if agent_id is None:
        return []
    if agent_id not in ctx.team.ids(Role.OPERATIVE):
        return [f"{agent_id!r} is not an operative of this team ({', '.join(ctx.team.ids(Role.OPERATIVE))})"]
    return []


def _nesting(parent: dict | None, child_type: str) -> list[str]:
    if parent is None:
        return []
    parent_type = ProductType(parent["type"])
    if not parent_type.can_contain(ProductType(child_type)):
        return [f"a {parent_type.value} product cannot contain a {child_type} product"
                + (" (Content is a leaf)" if parent_type is ProductType.CONTENT else
                   " (a Collection holds Content only)")]
    return []


def team_owner(item: InitialProduct, ctx: RuleContext) -> list[str]:
    problems = _operative(item.owner, ctx)
    if not ctx.once("product-name", item.name.casefold()):
        problems.append(f"two initial products are named {item.name!r}")
    return problems


def product_tree(item: Any, ctx: RuleContext) -> list[str]:
    if isinstance(item, AddProduct):
        return _add(item, ctx)
    product = ctx.product(item.product_id)
    if product is None:
        return [f"product {item.product_id!r} does not exist (or was removed)"]
    if isinstance(item, RemoveProduct):
        live_children = [c["name"] for c in ctx.snapshot.children(item.product_id)]
        return [f"remove or move its children first: {', '.join(live_children)}"] if live_children else []
    if isinstance(item, MoveProduct):
        return _move(item, product, ctx)
    if isinstance(item, UpdateProduct):
        return _update(item, product, ctx)
    return []


def _add(item: AddProduct, ctx: RuleContext) -> list[str]:
    problems = []
    if item.new_id in ctx.added:
        problems.append(f"{item.new_id} is used by two ADD operations")
    parent = ctx.product(item.parent_id)
    if parent is None:
        problems.append(f"parent {item.parent_id!r} does not exist (use an existing id or an earlier new-N)")
    problems += _nesting(parent, item.product.type.value)
    if item.product.name.casefold() in ctx.children_names(item.parent_id):
        problems.append(f"a product named {item.product.name!r} already exists under that parent")
    problems += _operative(item.product.assignee, ctx)
    if not problems:
        ctx.added[item.new_id] = {"id": item.new_id, "name": item.product.name, "type": item.product.type.value,
                                  "parent_id": item.parent_id, "status": "open"}
    return problems


def _descends_from(ctx: RuleContext, product_id: str, ancestor_id: str) -> bool:
    current = ctx.product(product_id)
    for _ in range(1000):  # a tree is never deeper; guards against a corrupt cycle
        if current is None or current.get("parent_id") is None:
            return False
        if current["parent_id"] == ancestor_id:
            return True
        current = ctx.product(current["parent_id"])
    return False


def _move(item: MoveProduct, product: dict, ctx: RuleContext) -> list[str]:
    parent = ctx.product(item.parent_id)
    if parent is None:
        return [f"new parent {item.parent_id!r} does not exist"]
    if item.parent_id == item.product_id or _descends_from(ctx, item.parent_id, item.product_id):
        return ["a product cannot move under itself or one of its descendants"]
    problems = _nesting(parent, product["type"])
    if product["name"].casefold() in ctx.children_names(item.parent_id):
        problems.append(f"a product named {product['name']!r} already exists under the new parent")
    return problems


def _update(item: UpdateProduct, product: dict, ctx: RuleContext) -> list[str]:
    patch = item.product
    problems = []
    if patch.type is not None:
        problems += _nesting(ctx.product(product["parent_id"]) if product.get("parent_id") else None, patch.type.value)
        for child in ctx.snapshot.children(item.product_id):
            problems += _nesting({"type": patch.type.value}, child["type"])
    if patch.name is not None and patch.name.casefold() != product["name"].casefold():
        if patch.name.casefold() in ctx.children_names(product.get("parent_id")):
            problems.append(f"a product named {patch.name!r} already exists under the same parent")
    problems += _operative(patch.assignee, ctx)
    if not problems and product.get("status") == "accepted":
        ctx.reopened[item.product_id] = {**product, "status": "open"}
    return problems


def assignable_product(item: Assignment, ctx: RuleContext) -> list[str]:
    problems = _operative(item.assignee, ctx)
    product = ctx.product(item.product_id)
    if product is None:
        problems.append(f"product {item.product_id!r} does not exist")
    elif product.get("status") in CLOSED_STATUSES:
        problems.append(f"product {product['name']!r} is {product['status']}; it takes no more work")
    if not ctx.once("assignment", item.product_id):
        problems.append("a product gets one assignee per round; it is assigned twice in this answer")
    for attached in item.attached_context:
        if ctx.product(attached.product_id) is None:
            problems.append(f"attachedContext names unknown product {attached.product_id!r}")
    return problems


def acceptable_version(item: Acceptance, ctx: RuleContext) -> list[str]:
    snapshot = ctx.snapshot
    product = snapshot.products.get(item.product_id)
    if product is None or product.get("status") == "removed":
        return [f"product {item.product_id!r} does not exist"]
    if not item.accepted:
        return [] if item.rejection_reason else ["a rejection needs a rejectionReason"]
    if product.get("status") == "accepted":
        return [f"{product['name']!r} is already accepted"]
    latest = snapshot.latest_version(item.product_id)
    if latest is None:
        return [f"{product['name']!r} has no version to accept"]
    version_id = item.version_id or latest["id"]
    if version_id != latest["id"]:
        return [f"only the latest version can be accepted (version {latest['number']})"]
    problems = _passing_problems(f"version {latest['number']} of {product['name']!r}", latest, ctx)
    # "The DoD met" is the owner's judgement, made at this round's Reflect on the version the
    # Chair would accept; the Watchdog's passed inspection is a separate condition above. A version
    # written this round (only the closing decisions after Inspect see one) came after that Reflect:
    # no reflection speaks for it, so the Chair judges its DoD with the Watchdog's approval.
    if latest.get("round") == snapshot.round:
        return problems
    verdicts = [r["dod_status"] for r in snapshot.reflections_in() if r.get("product_id") == item.product_id]
    if not verdicts:
        problems.append(f"its owner ({product.get('owner')}) has not reflected on it this round, so its "
                        "definition of done is not reported met")
    elif any(status != "met" for status in verdicts):
        problems.append(f"its owner reports the definition of done as {', '.join(s for s in verdicts if s != 'met')}")
    return problems


def _passing_problems(what: str, version: dict, ctx: RuleContext) -> list[str]:
    """Why ``version`` (its product's latest) did not pass every inspection: a Watchdog's verdict
    other than approved, or an open collab of importance >= 8 on its product."""
    problems = _inspection_problems(what, version["id"], ctx)
    blocking = ctx.snapshot.blocking_collabs(version["product_id"])
    if blocking:
        problems.append(f"{len(blocking)} open collab(s) of importance >= 8 block acceptance: "
                        + "; ".join(c.get("summary", "") for c in blocking))
    return problems


def closing_versions(ctx: RuleContext, *, last_round: bool) -> list[dict]:
    """The versions the Chair decides at the closing decisions after this round's Inspect: each
    open product's version written this round that passed every inspection, decided in the round
    it passed rather than at the next round's Plan; in the mission's last round every such
    version, passed or not (nothing after it decides them)."""
    snapshot = ctx.snapshot
    return [v for v in snapshot.new_versions()
            if snapshot.products.get(v["product_id"], {}).get("status") == "open"
            and (last_round or not _passing_problems("", v, ctx))]


def _inspection_problems(what: str, version_id: str, ctx: RuleContext) -> list[str]:
    """Every watchdog of the team must have approved the version (one watchdog: its latest
    inspection, whoever wrote it)."""
    watchdogs = ctx.team.ids(Role.WATCHDOG)
    if len(watchdogs) <= 1:
        inspection = ctx.snapshot.inspection_of(version_id)
        if inspection is None:
            return [f"{what} has not been inspected yet"]
        return [] if inspection["assessment"] == "approved" else \
            [f"{what} did not pass inspection ({inspection['assessment']})"]
    problems = []
    for watchdog in watchdogs:
        inspection = ctx.snapshot.inspection_of(version_id, watchdog)
        if inspection is None:
            problems.append(f"{what} has not been inspected yet by {watchdog}")
        elif inspection["assessment"] != "approved":
            problems.append(f"{what} did not pass {watchdog}'s inspection ({inspection['assessment']})")
    return problems


def open_product(item: ChairVersion, ctx: RuleContext) -> list[str]:
    product = ctx.snapshot.products.get(item.product_id)
    if product is None or product.get("status") in CLOSED_STATUSES:
        return [f"product {item.product_id!r} is not open for new versions"]
    if not ctx.once("version", item.product_id):
        return ["one new version per product per answer"]
    return []


def known_recipients(item: Remark, ctx: RuleContext) -> list[str]:
    known = set(ctx.team.ids()) | {"self"}
    unknown = [r for r in item.recipients if r not in known and not r.startswith("u:")]
    return [f"unknown recipient(s) {', '.join(unknown)}; use agent ids, self or u:all"] if unknown else []


def known_decision(item: Decision, ctx: RuleContext) -> list[str]:
    """The record of decisions: a change names a current decision, once per answer; a new decision
    settles a topic no current decision settles (else it is that decision's change)."""
    current = ctx.snapshot.current_decisions()
    if item.replaces is not None:
        if item.replaces not in {d["key"] for d in current}:
            known = ", ".join(d["key"] for d in current) or "none yet"
            return [f"replaces names no current decision {item.replaces!r} (current decisions: {known})"]
        return [] if ctx.once("decision", item.replaces) else [f"one change of {item.replaces} per answer"]
    topic = " ".join(item.topic.casefold().split())
    same = next((d for d in current if " ".join(str(d.get("topic")).casefold().split()) == topic), None)
    if same is not None:
        return [f"{same['key']} already settles {item.topic!r}: to change it, name it in replaces"]
    if not ctx.once("decision topic", topic):
        return [f"one decision per topic: {item.topic!r} is decided twice in this answer"]
    ctx.decided.append(item.topic)
    return []


def owned_product(item: Reflection, ctx: RuleContext) -> list[str]:
    product = ctx.product(item.refers_to_product)
    if product is None:
        return [f"product {item.refers_to_product!r} does not exist"]
    problems = []
    if product.get("owner") != ctx.agent_id:
        problems.append(f"you reflect only on products you own; {product['name']!r} is owned by {product.get('owner')}")
    # An endorsement needs no answer; one that is answered anyway is no mistake.
    open_ids = {c["id"] for c in ctx.snapshot.unanswered_collabs(item.refers_to_product)}
    for response in item.feedback_responses:
        if response.collab_id not in open_ids:
            problems.append(f"collab {response.collab_id!r} is not open feedback on this product")
    if not ctx.once("reflection", item.refers_to_product):
        problems.append("one reflection per product")
    return problems


def answerable_collab(item: FeedbackResponse, ctx: RuleContext) -> list[str]:
    """Write's feedbackResponses: an open collab on a product the operative owns or was assigned
    this round, answered once."""
    collab = next((c for c in ctx.snapshot.collabs if c["id"] == item.collab_id), None)
    if collab is None:
        return ["this collab does not exist"]
    if not ctx.once("response", item.collab_id):
        return ["this collab is answered twice in this answer; answer it once"]
    if collab["id"] in ctx.snapshot.addressed:
        return ["this collab is already answered; it is no longer open feedback"]
    product = ctx.product(collab.get("product_id") or "")
    assigned = {a["product_id"] for a in ctx.snapshot.assignments_in() if a.get("assignee") == ctx.agent_id}
    if product is None or (product.get("owner") != ctx.agent_id and product["id"] not in assigned):
        return [f"this collab is on {repr(product['name']) if product else 'no product'}, which you "
                "neither own nor were assigned this round; answer only feedback on your own work"]
    return []


def known_product(item: Collab, ctx: RuleContext) -> list[str]:
    product = ctx.product(item.refers_to_product)
    if product is None:
        return [f"product {item.refers_to_product!r} does not exist"]
    problems = []
    if item.refers_to_version:
        version = ctx.snapshot.version(item.refers_to_version)
        if version is None or version["product_id"] != item.refers_to_product:
            problems.append("refersToVersion is not a version of that product")
    known_collabs = {c["id"] for c in ctx.snapshot.collabs}
    problems += [f"respondingToCollabIds: unknown collab {c!r}" for c in item.responding_to_collab_ids
                 if c not in known_collabs]
    problems += [f"addresseeIds: unknown agent {a!r}" for a in item.addressee_ids
                 if a not in ctx.team.ids() and a != USER_ID]
    problems += [f"referencesProductIds: unknown product {p!r}" for p in item.references_product_ids
                 if ctx.product(p) is None]
    return problems


def assigned_product(item: VersionWrite, ctx: RuleContext) -> list[str]:
    assigned = {a["product_id"] for a in ctx.snapshot.assignments_in() if a.get("assignee") == ctx.agent_id}
    product = ctx.snapshot.products.get(item.product_id)
    name = product["name"] if product else item.product_id
    if item.product_id not in assigned:
        mine = ", ".join(ctx.snapshot.products[p]["name"] for p in sorted(assigned) if p in ctx.snapshot.products)
        return [f"you may write versions only of products assigned to you this round "
                f"({mine or 'none'}); {name!r} is not one of them"]
    if not ctx.once("version", item.product_id):
        return ["one new version per product per answer"]
    return []


def peer_version(item: Review, ctx: RuleContext) -> list[str]:
    version = ctx.snapshot.version(item.version_id)
    if version is None or version["product_id"] != item.product_id:
        return ["versionId is not a version of that product"]
    if version.get("round") != ctx.snapshot.round:
        return ["review only versions written this round"]
    product = ctx.snapshot.products.get(item.product_id, {})
    if product.get("owner") == ctx.agent_id or version.get("author") == ctx.agent_id:
        return ["you review other operatives' products, not your own"]
    if not ctx.once("review", item.version_id):
        return ["one review per version"]
    return []


def new_version(item: Inspection, ctx: RuleContext) -> list[str]:
    version = ctx.snapshot.version(item.version_id)
    if version is None or version["product_id"] != item.product_id:
        return ["versionId is not a version of that product"]
    problems = list(item.verdict_problems())
    inspector = ctx.team.get(ctx.agent_id)
    focus = inspector.focus if inspector else ()
    problems += [f"findings.{index}: category {finding.category!r} is outside your focus ({', '.join(focus)}); "
                 "another watchdog inspects it" for index, finding in enumerate(item.findings)
                 if focus and finding.category not in focus]
    if version.get("round") != ctx.snapshot.round:
        problems.append("inspect only versions written this round")
    if not ctx.once("inspection", item.version_id):
        problems.append("one inspection per version")
    return problems


def team_speaker(item: Message, ctx: RuleContext) -> list[str]:
    allowed = ctx.team.speakers(ctx.agent_id)
    if item.as_agent not in allowed:
        return [f"asAgent {item.as_agent!r} may not speak; speakers are {', '.join(allowed)}"]
    return []


ABOUT_RULES: dict[str, Rule] = {
    "team_owner": team_owner,
    "product_tree": product_tree,
    "assignable_product": assignable_product,
    "acceptable_version": acceptable_version,
    "open_product": open_product,
    "known_recipients": known_recipients,
    "known_decision": known_decision,
    "owned_product": owned_product,
    "known_product": known_product,
    "answerable_collab": answerable_collab,
    "assigned_product": assigned_product,
    "peer_version": peer_version,
    "new_version": new_version,
    "team_speaker": team_speaker,
}


def step_problems(step: str, answer: Any, ctx: RuleContext) -> list[tuple[str, str]]:
    """Rules about a whole answer rather than one item: (path, problem) pairs. Most catch an
    answer that is valid item by item but would leave the mission unable to progress."""
    return STEP_RULES[step](answer, ctx) if step in STEP_RULES else []


def _every_new_version_inspected(answer: Any, ctx: RuleContext) -> list[tuple[str, str]]:
    inspected = {i.version_id for i in answer.inspections}
    missing = [v for v in ctx.snapshot.new_versions() if v["id"] not in inspected]
    if missing:
        names = ", ".join(f"{ctx.snapshot.products[v['product_id']]['name']} version {v['number']}" for v in missing)
        return [("inspections", f"every new version must be inspected; missing: {names}")]
    return []


def _every_assignment_written(answer: Any, ctx: RuleContext) -> list[tuple[str, str]]:
    written = {v.product_id for v in answer.versions}
    missing = [ctx.snapshot.products[a["product_id"]]["name"] for a in ctx.snapshot.assignments_in()
               if a.get("assignee") == ctx.agent_id and a["product_id"] not in written
               and a["product_id"] in ctx.snapshot.products]
    if missing:
        return [("versions", f"write a new version of every product assigned to you this round; "
                             f"missing: {', '.join(missing)}")]
    return []


def _every_versioned_product_reflected(answer: Any, ctx: RuleContext) -> list[tuple[str, str]]:
    """The Chair accepts a version only on its owner's word at this round's Reflect."""
    reflected = {r.refers_to_product for r in answer.reflections}
    missing = [p["name"] for p in ctx.snapshot.owned_by(ctx.agent_id)
               if p.get("status") == "open" and ctx.snapshot.latest_version(p["id"]) and p["id"] not in reflected]
    if missing:
        return [("reflections", "reflect on every open product of yours that has a version (the Chair accepts "
                                f"one only on your word); missing: {', '.join(missing)}")]
    return []


def _plan_moves_the_mission(answer: Any, ctx: RuleContext) -> list[tuple[str, str]]:
    """A plan that changes nothing while work is open leaves the round with nothing to do."""
    acts = (answer.tree_operations, answer.assignments, answer.acceptance, answer.chair_versions,
            answer.bootstrap_overrides)
    open_work = [p for p in ctx.snapshot.live_products() if p.get("status") == "open"
                 and p["type"] in (ProductType.CONTENT, ProductType.DECISION)]
    if open_work and not any(acts):
        return [("", f"this plan changes nothing while {len(open_work)} product(s) are open: assign work, accept "
                     "or reject versions, or change the tree; or halt (done when the mission is met, a question "
                     "when the team cannot go on without the user)")]
    return []


def _done_when_all_accepted(answer: Any, ctx: RuleContext) -> list[tuple[str, str]]:
    """The closing decisions end the mission only once they leave no work product open."""
    if not answer.done:
        return []
    accepted = {a.product_id for a in answer.acceptance if a.accepted}
    still_open = [p["name"] for p in ctx.snapshot.live_products() if p.get("status") == "open"
                  and p["type"] in (ProductType.CONTENT, ProductType.DECISION) and p["id"] not in accepted]
    if still_open:
        return [("done", f"the mission ends only when every product is accepted; still open: {', '.join(still_open)}")]
    return []


STEP_RULES: dict[str, Callable[[Any, RuleContext], list[tuple[str, str]]]] = {
    Step.REFLECT: _every_versioned_product_reflected,
    Step.PLAN: _plan_moves_the_mission,
    Step.WRITE: _every_assignment_written,
    Step.INSPECT: _every_new_version_inspected,
    Step.CLOSE: _done_when_all_accepted,
}
