"""Context bench: what the examples' prompts show, checked against the per-step contract.

Runs each example mission with its scripted model (the model is wrapped, so every call's
messages are kept), then checks every call's prompt against ``cabal.rounds.showing.STEP_SHOWS``
from the graph as it was at the start of that call's step: each item the contract says the step
shows (the agent's products' latest versions, the latest inspection's findings, the open
collabs, the directive, the agent's own reflection, the versions to judge...) must be in the
prompt, whole. It also looks in every message of every call (system, prompt, context answers)
for an internal graph id (``r1.reflect.operative-1.add_collab0``): the goal is none.

Prints ``name value unit`` lines:

    calls 57 count
    prompt_chars_mean 6120 chars          # the user prompt a call starts with (system prompt apart)
    prompt_chars_max 14877 chars
    prompt_chars_mean_write 9033 chars    # ... one line per step
    contract_items 412 count              # items the contract asked for, over all calls
    contract_present 100.0 %              # of them, found whole in the prompt
    internal_ids_seen 0 count             # goal 0
    cacheable_share 41.0 %                # of the input tokens, what a provider's prompt cache could serve (issue 37)
    schemas_share 21.0 %                  # of the input characters, the tools' schemas
    input_chars 512000 chars              # every call's tools and messages, as costing lays them out
    cacheable_share_launch 48.0 %         # ... the three, per example
    missing <step> <item> <what>          # one line per item not found (none when all are)

A benchmark of what agents see, not a timed test. Usage: python bench/context_bench.py [--show]
(``--show`` prints every prompt, for reading them).
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import tempfile
import threading
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

EXAMPLES = ["launch", "research", "sources", "team"]
# A graph id a turn writes: r<round>.<step>.<agent or kind>... (cabal/rounds/ids.py).
TOOL_CALL_ID = re.compile(r"r\d+\.\w+\.[\w-]+\.tool\d+")
INTERNAL_ID = re.compile(r"\br\d+\.(?:bootstrap|reflect|plan|write|peer_review|inspect|presentation|close|budget)\.[\w.-]+")
REFERENCE = re.compile(r"\[\[[a-z]:[^\]]*\]\]")


@dataclass
class Call:
    round: int
    step: str
    agent: str
    user: str  # the first user message: the charter and the step's prompt
    everything: str  # every message of the call, context answers included


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show", action="store_true", help="print every prompt")
    parser.add_argument("--examples", nargs="*", default=EXAMPLES)
    options = parser.parse_args()

    from cabal.graph import EmbeddedServer

    folder = Path(tempfile.mkdtemp(prefix="cabal-context-bench-"))
    home = folder / ".cabal"
    server = EmbeddedServer(home)
    server.start()
    try:
        calls, checked, cassettes = [], [], {}
        for name in options.examples:
            found, items, cassette = run_example(home, name)
            calls += found
            checked += items
            cassettes[name] = cassette
            if options.show:
                for call in found:
                    print(f"\n===== {name} r{call.round} {call.step} {call.agent}\n{call.user}")
        report(calls, checked)
        shares(cassettes)
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


def run_example(home: Path, name: str) -> tuple[list[Call], list[tuple[str, str, str, bool]], Path]:
    """Run one example, keeping each call; then check each call against the contract."""
    from cabal.llm import FunctionChatModel, ModelRequest, ScriptedChatModel
    from cabal.llm.keys import AGENT_KEY, ROUND_KEY, STEP_KEY
    from cabal.rounds.api import run_mission
    from cabal.rounds.workspace import Workspace, mission_graph

    folder = ROOT / "examples" / name
    mission_file = next(folder.glob("*.mission.yaml"))
    script = ScriptedChatModel.from_file(next(folder.glob("*.script.yaml")))
    calls: list[Call] = []
    lock = threading.Lock()

    def answer(request: ModelRequest):
        meta = request.metadata
        with lock:
            calls.append(Call(int(meta[ROUND_KEY]), str(meta[STEP_KEY]), str(meta[AGENT_KEY]), _text(request.messages[1]),
                              "\n".join(_text(m) for m in request.messages)))
        return script.bind_tools(list(request.tools)).invoke(list(request.messages), config={"metadata": dict(meta)})

    result = run_mission(mission_file, model=FunctionChatModel(answer), home=home)
    if result.state != "done":
        raise SystemExit(f"{name}: the example ended {result.state} ({result.detail})")
    graph = mission_graph(Workspace.at(home), result.mission_id)
    try:
        checked = [(call.step, item, what, present) for call in calls if _first_of_turn(call, calls)
                   for item, what, present in contract_items(graph, result.mission_id, call)]
    finally:
        graph.close()
    return calls, checked, Workspace.at(home).mission_dir(result.mission_id) / "cassette.jsonl"


def shares(cassettes: dict[str, Path]) -> None:
    """The examples' calls as a provider would bill them: the share of input its prompt cache could
    serve (a prefix of an earlier call's, from 1,024 tokens: ``cabal.llm.costing``), the share of
    input characters that is the tools' schemas, and the input characters; in all, then per example."""
    from cabal.llm.cassette import Cassette

    read = {name: Cassette.read(path) for name, path in cassettes.items()}
    for suffix, group in [("", list(read.values())), *((f"_{name}", [cassette]) for name, cassette in read.items())]:
        cacheable, schemas, chars = cassette_shares(group)
        print(f"cacheable_share{suffix} {100 * cacheable:.1f} %")
        print(f"schemas_share{suffix} {100 * schemas:.1f} %")
        print(f"input_chars{suffix} {chars} chars")


def cassette_shares(cassettes: list) -> tuple[float, float, int]:
    """Over ``cassettes`` (each its own cache): the cacheable share of input tokens, the schemas'
    share of input characters, and the input characters."""
    from cabal.llm.costing import call_tokens, price_run, schema_chars

    cost = price_run([row for cassette in cassettes for row in call_tokens(cassette)], "", None)
    counted = [schema_chars(cassette) for cassette in cassettes]
    chars = sum(total for _, total in counted)
    return cost.cacheable_share, sum(tools for tools, _ in counted) / max(chars, 1), chars


def _text(message) -> str:
    """A message's text, its blocks (the charter, the step's prompt) apart as a model reads them."""
    if isinstance(message.content, str):
        return message.content
    return "\n\n".join(block.get("text", "") for block in message.content if isinstance(block, dict))


def _first_of_turn(call: Call, calls: list[Call]) -> bool:
    """Only a turn's first call is checked: later calls of the turn carry the same prompt."""
    same = [c for c in calls if (c.round, c.step, c.agent) == (call.round, call.step, call.agent)]
    return same[0] is call


def _norm(text: object) -> str:
    """A text as compared: references, quote marks and white space left out (the prompt shows
    short ids, and quotes a source's lines with '> ')."""
    lines = (line[2:] if line.startswith("> ") else line for line in str(text or "").splitlines())
    return " ".join(REFERENCE.sub("", " ".join(lines)).split())


@dataclass(frozen=True)
class _GraphRoster:
    """The team as the mission's agent nodes list it (the ``Roster`` the rules read): the bench
    checks each prompt from the graph alone."""

    agents: dict

    def get(self, agent_id: str):
        return None

    def ids(self, role=None) -> list[str]:
        return [agent for agent, node in self.agents.items() if role is None or node.get("type") == role]

    def speakers(self, agent_id: str) -> list[str]:
        return []


def contract_items(graph, mission_id: str, call: Call):
    """(item, what, present) for each thing the contract says this call's prompt shows whole."""
    from cabal.rounds.evidence import citing_sentences
    from cabal.rounds.rules import RuleContext, closing_versions
    from cabal.rounds.showing import BOUNDS, STEP_SHOWS, Shown
    from cabal.rounds.snapshot import load_snapshot
    from cabal.vocabulary import Role, Step

    step = Step(call.step)
    view = as_of(load_snapshot(graph, mission_id, call.round, step=step), call.round, step)
    prompt = _norm(call.user)
    wants = STEP_SHOWS.get(step, ())

    def has(item: Shown, what: str, text: object, limit: int = BOUNDS.text) -> tuple[str, str, bool]:
        wanted = _norm(str(text or "")[: limit // 2])  # a head is enough to tell it is there, whole or cut
        return item.value, what, wanted in prompt

    def contents(version_ids: list[str]) -> dict[str, str]:
        return {v["id"]: v.get("content", "") for v in graph.get_many(version_ids)}

    out = []
    watchdogs = [a["id"] for a in view.agents.values() if a.get("type") == Role.WATCHDOG]
    if Shown.OWN_PRODUCTS in wants or Shown.ASSIGNED_PRODUCTS in wants:
        if step == Step.PEER_REVIEW:  # the reviewer's own products, beside the versions it judges
            judged = {v["product_id"] for v in view.new_versions()}
            products = [p for p in view.owned_by(call.agent) if p["id"] not in judged]
        elif Shown.OWN_PRODUCTS in wants:
            products = [p for p in view.owned_by(call.agent) if p.get("status") == "open"]
        else:
            products = [view.products[a["product_id"]] for a in view.assignments_in() if a["assignee"] == call.agent]
        for product in products:
            latest = view.latest_version(product["id"])
            if latest:
                text = contents([latest["id"]])[latest["id"]]
                out.append(has(Shown.OWN_PRODUCTS, f"{product['name']} latest content", text, BOUNDS.version))
                for inspection in view.inspections_of(latest["id"], watchdogs):
                    for finding in view.findings_of(inspection["id"]):
                        out.append(has(Shown.LATEST_INSPECTION, f"finding on {product['name']}", finding.get("issue")))
                        out.append(has(Shown.LATEST_INSPECTION, f"recommendation on {product['name']}",
                                       finding.get("recommendation")))
            if step == Step.PEER_REVIEW:
                continue
            for collab in view.open_collabs(product["id"]):
                out.append(has(Shown.OPEN_COLLABS, f"collab on {product['name']}", collab.get("comment")))
            for assignment in view.active_assignments(call.agent):
                if assignment["product_id"] == product["id"]:
                    for key in ("objective", "dod", "why", "context"):
                        if assignment.get(key):
                            out.append(has(Shown.DIRECTIVES, f"directive {key} for {product['name']}", assignment[key]))
            if Shown.OWN_REFLECTION in wants:
                for reflection in view.reflections_in():
                    if reflection.get("author") == call.agent and reflection["product_id"] == product["id"]:
                        out.append(has(Shown.OWN_REFLECTION, f"own reflection on {product['name']}",
                                       reflection.get("next_version_delta")))
    if Shown.VERSIONS_TO_JUDGE in wants and step == Step.CLOSE:  # the versions awaiting the closing decisions
        last = view.round >= int(view.mission.get("rounds") or 0)
        judged = closing_versions(RuleContext(view, _GraphRoster(view.agents), call.agent), last_round=last)
    elif Shown.VERSIONS_TO_JUDGE in wants:
        judged = [v for v in view.new_versions()
                  if step == Step.INSPECT or (view.products[v["product_id"]].get("owner") != call.agent
                                              and v.get("author") != call.agent)]
        texts = contents([v["id"] for v in judged])
        for version in judged:
            product = view.products[version["product_id"]]
            out.append(has(Shown.VERSIONS_TO_JUDGE, f"{product['name']} new content", texts[version["id"]], BOUNDS.version))
            out.append(has(Shown.VERSIONS_TO_JUDGE, f"{product['name']} DoD", product.get("dod")))
            if Shown.PEER_REVIEWS in wants:
                for review in view.reviews_of(version["id"]):
                    out.append(has(Shown.PEER_REVIEWS, f"review of {product['name']}", review.get("summary")))
                    out += [has(Shown.PEER_REVIEWS, f"a review's collab on {product['name']}", collab.get("comment"))
                            for collab in view.collabs_of_review(review)]
            if Shown.OWN_EARLIER_FINDINGS in wants:
                earlier = {v["id"] for v in view.versions_of(product["id"]) if v["id"] != version["id"]}
                for inspection in view.inspections:
                    if inspection.get("version_id") in earlier and inspection.get("author") == call.agent:
                        for finding in view.findings_of(inspection["id"]):
                            out.append(has(Shown.OWN_EARLIER_FINDINGS, f"earlier finding on {product['name']}",
                                           finding.get("issue")))
            if Shown.CITED_EVIDENCE in wants:
                for cited in citing_sentences(texts[version["id"]]):
                    named = graph.get(cited) or {}  # a section's text or a tool call's result (a whole source: its list)
                    out.append(has(Shown.CITED_EVIDENCE, f"{cited}, cited by {product['name']}",
                                   named.get("text") or named.get("result"), BOUNDS.cited))
    if Shown.REFLECTIONS in wants:
        for reflection in view.reflections_in():
            out.append(has(Shown.REFLECTIONS, f"reflection by {reflection.get('author')}",
                           reflection.get("next_version_delta")))
    if Shown.VERDICTS in wants:
        versions = (view.new_versions() if step == Step.PRESENTATION else
                    [v for p in view.live_products() if p.get("status") == "open" and (v := view.latest_version(p["id"]))])
        for version in versions:
            for inspection in view.inspections_of(version["id"], watchdogs):
                for finding in view.findings_of(inspection["id"]):
                    out.append(has(Shown.VERDICTS, "finding on a version awaiting a decision", finding.get("issue")))
    if Shown.BLOCKING_COLLABS in wants:
        for collab in view.open_collabs():
            if int(collab.get("importance", 0)) >= 5:
                out.append(has(Shown.BLOCKING_COLLABS, "open collab of importance 5+", collab.get("comment")))
    if Shown.OPEN_DODS in wants:
        out += [has(Shown.OPEN_DODS, f"DoD of {p['name']}", p.get("dod")) for p in view.live_products()
                if p.get("status") == "open"]
    if Shown.DECISIONS in wants:
        for acceptance in view.acceptances:
            if acceptance.get("round") == call.round and acceptance.get("rejection_reason"):
                out.append(has(Shown.DECISIONS, "a rejection's reason", acceptance["rejection_reason"]))
    if Shown.DECISION_RECORD in wants:
        for decision in view.current_decisions():
            out.append(has(Shown.DECISION_RECORD, f"decision {decision['key']}", decision.get("decision")))
    if Shown.REMARKS in wants:
        for remark in view.remarks_for(call.agent, step):
            out.append(has(Shown.REMARKS, f"remark from {remark.get('author')}", remark.get("content")))
    if Shown.SOURCES_TEXT in wants and (step != Step.WRITE or any(a["assignee"] == call.agent
                                                                 for a in view.assignments_in())):
        sources = view.current_sources()
        if sum(int(s.get("size") or 0) for s in sources) <= BOUNDS.sources_inline:
            for source in sources:
                for chunk in graph.find("chunk", {"source_id": source["id"]}):
                    out.append(has(Shown.SOURCES_TEXT, f"section of {source['source_id']}", chunk.get("text")))
    return out


def as_of(view, round_number: int, step):
    """The view without what was written at or after (round, step): the graph is read once the
    mission has ended, and every id a turn writes starts with its round and step."""
    import dataclasses

    from cabal.vocabulary import Step

    def earlier(row: dict) -> bool:
        match = re.match(r"r(\d+)\.([a-z_]+)\.", str(row.get("id")))
        if not match or match[2] not in set(Step):
            return True
        return (int(match[1]), Step(match[2]).position) < (round_number, step.position)

    tables = {name: [row for row in getattr(view, name) if earlier(row)]
              for name in ("versions", "collabs", "assignments", "reflections", "reviews", "inspections", "findings",
                           "acceptances", "remarks", "halts", "turns", "decisions")}
    products = {key: row for key, row in view.products.items() if earlier(row)}
    return dataclasses.replace(view, products=products, **tables, _latest={}, _contents={})


def report(calls: list[Call], checked: list[tuple[str, str, str, bool]]) -> None:
    sizes = [len(c.user) for c in calls]
    print(f"calls {len(calls)} count")
    print(f"prompt_chars_mean {statistics.mean(sizes):.0f} chars")
    print(f"prompt_chars_max {max(sizes)} chars")
    by_step: dict[str, list[int]] = defaultdict(list)
    for call in calls:
        by_step[call.step].append(len(call.user))
    for step, values in by_step.items():
        print(f"prompt_chars_mean_{step} {statistics.mean(values):.0f} chars")
    present = [item for item in checked if item[3]]
    print(f"contract_items {len(checked)} count")
    print(f"contract_present {100 * len(present) / max(len(checked), 1):.1f} %")
    # A tool result's citable id (``tooluse.tool_call_id``: r1.write.operative-1.tool2) is shown by
    # design, the same in every prompt; any other graph id is a leak.
    leaked = sorted({match for call in calls for match in INTERNAL_ID.findall(call.everything)
                     if not TOOL_CALL_ID.fullmatch(match)})
    print(f"internal_ids_seen {len(leaked)} count")
    for match in leaked[:10]:
        print(f"internal_id {match}")
    for step, item, what, ok in checked:
        if not ok:
            print(f"missing {step} {item} {what}")


if __name__ == "__main__":
    main()
