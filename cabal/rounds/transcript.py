"""A mission's transcript, rendered from the graph: the conversation and what was decided."""

from __future__ import annotations

from cabal.graph import ContextGraph
from cabal.vocabulary import CHAIR_ID, USER_ID, Step


def conversation(graph: ContextGraph) -> list[dict]:
    """The user's chat, in order: Envoy messages by speaker, halts and answers, user notes."""
    entries = []
    for message in graph.find("message"):
        entries.append({"round": message.get("round", 0), "order": (1, message.get("position", 0)),
                        "speaker": message.get("as_agent"), "text": message.get("content"), "kind": "message"})
    for halt in graph.find("halt"):
        entries.append({"round": halt.get("round", 0), "order": (0, 0), "speaker": halt.get("author") or CHAIR_ID,
                        "text": halt.get("message"), "kind": f"halt:{halt.get('type')}", "options": halt.get("options") or []})
        if halt.get("answer"):
            entries.append({"round": halt.get("answered_round", halt.get("round", 0)), "order": (0, 1),
                            "speaker": "you", "text": halt.get("answer"), "kind": "answer"})
    for note in graph.find("collab", {"author": USER_ID}):
        entries.append({"round": note.get("round", 0), "order": (2, 0), "speaker": "you",
                        "text": note.get("comment"), "kind": "note"})
    return sorted(entries, key=lambda e: (e["round"], e["order"]))


def product_tree(graph: ContextGraph) -> list[tuple[int, dict, dict | None]]:
    """(depth, product, latest version meta) in tree order."""
    products = [p for p in graph.find("product") if p.get("status") != "removed"]
    latest: dict[str, dict] = {}
    for version in graph.find("version", fields=["product_id", "number", "title", "author"]):
        if version["number"] >= latest.get(version["product_id"], {}).get("number", 0):
            latest[version["product_id"]] = version
    rows: list[tuple[int, dict, dict | None]] = []

    def walk(parent: str | None, depth: int) -> None:
        for product in sorted((p for p in products if p.get("parent_id") == parent), key=lambda p: p["id"]):
            rows.append((depth, product, latest.get(product["id"])))
            walk(product["id"], depth + 1)

    walk(None, 0)
    return rows


def render_transcript(graph: ContextGraph, mission_id: str) -> str:
    mission = graph.get(mission_id) or {}
    lines = [f"# {mission.get('name', mission_id)} ({mission_id})", "",
             f"State: {mission.get('status')}, round {mission.get('round')}"
             + (f", stopped: {mission.get('stop_reason')}" if mission.get("stop_reason") else "")
             + (f" ({mission.get('detail')})" if mission.get("detail") else ""), "",
             "## Request", "", str(mission.get("request", "")), ""]
    if mission.get("charter"):
        lines += ["## Mission", "", str(mission["charter"]), ""]
        lines += [f"- objective: {o}" for o in mission.get("objectives") or []]
        lines += [f"- constraint: {c}" for c in mission.get("constraints") or []]
        lines.append("")
    lines += ["## Conversation", ""]
    current = None
    for entry in conversation(graph):
        if entry["round"] != current:
            current = entry["round"]
            lines += ["", f"### Round {current}", ""]
        if entry["kind"].startswith("halt"):
            label = "asks you" if entry["kind"] == "halt:question" else "closes the mission"
            options = f" (options: {', '.join(entry['options'])})" if entry.get("options") else ""
            lines.append(f"**{entry['speaker']} {label}:** {entry['text']}{options}")
        else:
            lines.append(f"**{entry['speaker']}:** {entry['text']}")
    lines += ["", "## Products", ""]
    for depth, product, version in product_tree(graph):
        shown = f"v{version['number']}" if version else "no version"
        lines.append(f"{'  ' * depth}- {product['name']} [{product['type']}] {product.get('status')} · {shown}"
                     f" · owner {product.get('owner')}")
    lines += ["", "## Turns", ""]
    turns = graph.find("moment", {"type": "turn"}, fields=["round", "step", "agent", "outcome", "prose", "attempts", "problems"])
    for turn in sorted(turns, key=lambda t: (t.get("round", 0), _step_position(t.get("step")), t.get("agent", ""))):
        problems = f" (rejected: {'; '.join(turn['problems'])})" if turn.get("outcome") == "failed" and turn.get("problems") else ""
        lines.append(f"- r{turn.get('round')} {turn.get('step')} {turn.get('agent')}: {turn.get('outcome')}, "
                     f"{turn.get('prose')} [{turn.get('attempts')} attempt(s)]{problems}")
    return "\n".join(lines).rstrip() + "\n"


def _step_position(step: str | None) -> int:
    """A turn's place in its round; the engine's own turns (a budget question) come last."""
    return Step(step).position if step in tuple(Step) else len(Step)
