"""The plan's sign-off: where the engine stops for the user before the team spends on work.

``gates: {plan: ask}`` (or ``--gate plan``): after Bootstrap (once the work is laid out,
``holds_work``), and with ``every_plan`` after each
Plan & Assign that adds or removes products, the engine asks the user to sign the plan off: the
charter, the team, the product tree with each definition of done and owner. ``approve`` goes on;
any other answer but a stop word is a change request the Chair applies at a Plan & Assign turn
of its own (the Plan's prompt shows it first), and the engine asks again with the revised plan.
``gates: {plan: auto}`` approves by that stated policy, never silently: the question and its
answer are written as for a user, with the policy as the answer's source.

Pure functions of the mission's view; the engine (``engine.py``) raises and reads the questions.
"""

from __future__ import annotations

from typing import Literal

from cabal.entities import ProductType
from cabal.rounds.events import AnswerSource
from cabal.rounds.ids import plan_gate_id
from cabal.rounds.snapshot import Snapshot, charter_map
from cabal.rounds.team import Team
from cabal.rounds.tooluse import APPROVE, approves

PLAN_GATE = "plan"  # the ``gate`` of a question that asks to sign the plan off
GATE_NAMES = (PLAN_GATE,)  # what ``--gate`` may name
STOP = "stop"
STOP_WORDS = frozenset({STOP, "no", "n", "halt", "end", "quit"})
POLICY: AnswerSource = "policy"  # the source of an answer the mission file's gates policy gave
PLAN_OPTIONS = (APPROVE, STOP)
WORK_TYPES = frozenset({ProductType.CONTENT.value, ProductType.DECISION.value})  # what gets versions

PlanDecision = Literal["approve", "change", "stop"]


def stops(answer: str) -> bool:
    words = answer.strip().lower()
    return words in STOP_WORDS or words.startswith(STOP)


def plan_decision(answer: str) -> PlanDecision:
    """What the user's answer to the plan's sign-off means."""
    if stops(answer):
        return "stop"
    return "approve" if approves(answer) else "change"


def plan_gates(snapshot: Snapshot, round_number: int | None = None) -> list[dict]:
    """The plan's sign-off questions (of one round, if given), in the order they were asked."""
    gates = [h for h in snapshot.halts if h.get("gate") == PLAN_GATE
             and (round_number is None or h.get("round") == round_number)]
    return sorted(gates, key=lambda h: (int(h.get("round") or 0), int(str(h["id"]).rsplit("gate", 1)[1])))


def gate_due(snapshot: Snapshot, round_number: int, *, every_plan: bool) -> str | None:
    """The id of the sign-off question to ask now at the end of ``round_number``'s Bootstrap
    (round 0) or Plan & Assign, or None when the plan needs none: signed off already, or (after
    round 0) unchanged in its products since the last sign-off, or not asked at every plan.

    A question already asked and not answered is asked again under its own id."""
    asked = plan_gates(snapshot, round_number)
    latest = asked[-1] if asked else None
    if latest is not None and latest.get("status") != "answered":
        return str(latest["id"])
    if latest is not None and plan_decision(str(latest.get("answer") or "")) == "approve":
        return None  # this round's plan is signed off (a node run again after the answer)
    if latest is None and round_number > 0:
        signed = [h for h in plan_gates(snapshot) if h.get("status") == "answered"
                  and plan_decision(str(h.get("answer") or "")) == "approve"]
        if not every_plan or (signed and _products(signed[-1]) == live_product_ids(snapshot)):
            return None
    return plan_gate_id(round_number, len(asked) + 1)


def change_request(snapshot: Snapshot) -> str | None:
    """The user's change to the plan the Chair applies at this Plan & Assign turn: the answer to
    the latest sign-off of this round when it asked for changes."""
    asked = plan_gates(snapshot, snapshot.round)
    if not asked or asked[-1].get("status") != "answered":
        return None
    answer = str(asked[-1].get("answer") or "")
    return answer if plan_decision(answer) == "change" else None


def holds_work(snapshot: Snapshot) -> bool:
    """Whether the tree has work to sign off: a Content or a Decision product. A tree of
    containers alone (a Library to fill) is no plan yet: the Chair lays the work out under them
    in a Plan & Assign turn of round 0, and the sign-off shows that tree."""
    return any(p.get("type") in WORK_TYPES for p in snapshot.live_products())


def live_product_ids(snapshot: Snapshot) -> list[str]:
    return sorted(str(p["id"]) for p in snapshot.live_products())


def _products(gate: dict) -> list[str]:
    return sorted(str(p) for p in gate.get("products") or [])


def plan_question(snapshot: Snapshot, team: Team) -> str:
    """The plan as the user signs it off: the charter, the team, the product tree, what to answer."""
    mission = snapshot.mission
    lines = ["Sign off the plan before the team starts work.", "", f"Mission: {mission.get('charter') or '-'}"]
    for title, key in (("Objectives", "objectives"), ("Constraints", "constraints")):
        items = [str(item) for item in mission.get(key) or []]
        lines += [f"{title}:", *(f"  - {item}" for item in items)] if items else [f"{title}: none"]
    personas, domains = charter_map(mission, "personas"), charter_map(mission, "domains")
    lines.append("Team:")
    for agent in team.agents:
        label = f"{agent.name} ({agent.id})" if agent.name and agent.name != agent.id else agent.id
        persona = team.persona(agent.id, personas)
        domain = domains.get(agent.id)
        where = ""
        if isinstance(domain, dict) and domain:
            where = f"; domain: {domain.get('responsibility') or ''}" + (f" ({domain['area']})" if domain.get("area")
                                                                        else "")
        lines.append(f"  - {label}: {persona or agent.role}{where}")
    lines.append("Products:")
    products = snapshot.live_products()
    names = {agent.id: agent.name or agent.id for agent in team.agents}

    def tree(parent: str | None, depth: int) -> None:
        for product in [p for p in products if (p.get("parent_id") or None) == parent]:
            owner = product.get("owner")
            lines.append(f"{'  ' * depth}  - {product.get('name')} [{product.get('type') or 'Content'}], owner "
                         f"{names.get(str(owner), owner) if owner else 'none'}: done when {product.get('dod') or '-'}")
            tree(str(product["id"]), depth + 1)

    known = {str(p["id"]) for p in products}
    tree(None, 0)
    for orphan in [p for p in products if p.get("parent_id") and p["parent_id"] not in known]:
        lines.append(f"  - {orphan.get('name')}, owner {orphan.get('owner') or 'none'}: done when {orphan.get('dod')}")
    if not products:
        lines.append("  (none)")
    lines += ["", f"Answer {APPROVE} to start the work, write the changes you want (the Chair revises the plan and "
                  f"asks again), or {STOP} to end the mission here."]
    return "\n".join(lines)

