"""Six things a capable model met in the prompts, each held by the exact lines its step now shows.

The prompts are built from hand-made snapshots (no model runs): the Envoy reads whose verdict is
whose, the Watchdog reads the feedback a peer review points at, the Chair reads the team the
user's cards describe, the open products' definitions of done and the mission's tools, and an
endorsement is feedback to keep, not to answer.
"""

from __future__ import annotations

from pathlib import Path

from cabal.entities import FeedbackResponse, Reflection
from cabal.llm import FunctionChatModel, ModelRequest, ScriptedChatModel
from cabal.rounds.api import run_mission
from cabal.rounds.context import Block, ContextBuilder, PromptLibrary
from cabal.rounds.facts import TeamTool
from cabal.rounds.rules import ABOUT_RULES, RuleContext
from cabal.rounds.snapshot import Snapshot
from cabal.rounds.team import Team, load_role_cards
from cabal.rounds.tooluse import team_tools
from cabal.tools.host import ToolHost
from cabal.tools.spec import ToolServerSpec
from cabal.vocabulary import Step

from tests.tools.test_tools import mission as tools_mission

from .test_team_cards import TWO_WATCHDOGS, cards_in

SERVERS = Path(__file__).resolve().parents[1] / "tools" / "servers.py"  # the tool tests' MCP servers

NAMED_OPERATIVE = """\
role: operative
members:
  - {id: operative-research, name: Rae, persona: A user researcher who turns interviews into findings., domain: Interviews}
  - {id: operative-pricing}
"""
BRIEF = {"id": "doc", "name": "Brief", "type": "Content", "parent_id": None, "owner": "operative-1",
         "status": "open", "dod": "Names two plans and their prices.", "round": 1}
NOTES = {"id": "notes", "name": "Notes", "type": "Content", "parent_id": None, "owner": "operative-2",
         "status": "accepted", "dod": "Lists the interviews.", "round": 1}
VERSION = {"id": "v9", "product_id": "doc", "number": 1, "title": "Brief", "change_summary": "First draft",
           "author": "operative-1", "round": 2}


def snapshot(round_number: int = 2, **tables) -> Snapshot:
    base: dict = dict(round=round_number, mission={"id": "m", "charter": "Price the app."}, agents={},
                      products={"doc": BRIEF, "notes": NOTES}, versions=[VERSION], collabs=[], assignments=[],
                      reflections=[], reviews=[], inspections=[], findings=[], acceptances=[], remarks=[], halts=[],
                      messages=[], turns=[], _contents={"v9": "Plans: Free, and Plus at 6 euros a month."})
    return Snapshot(**{**base, **tables})


def prompt(graph, view: Snapshot, team: Team, agent: str, step: Step, tools: tuple[TeamTool, ...] = ()):
    return ContextBuilder(graph, view, team, PromptLibrary(), tools=tools).build(agent, step)


def section(text: str, title: str) -> list[str]:
    """The lines of a prompt's section (sections are apart by a blank line)."""
    lines = text.split("\n")
    start = lines.index(f"## {title}") + 1
    return lines[start:next((i for i in range(start, len(lines)) if not lines[i]), len(lines))]


def collab(cid: str, type_: str, importance: int, comment: str, *, author: str = "operative-2",
           step: str = "peer_review", round_number: int = 2) -> dict:
    return {"id": cid, "type": type_, "product_id": "doc", "version_id": "v9", "importance": importance,
            "comment": comment, "summary": comment[:20], "author": author, "round": round_number, "step": step}


def test_the_envoy_reads_each_watchdogs_verdict_with_its_focus(graph, tmp_path: Path) -> None:
    team = Team.build(None, load_role_cards([cards_in(tmp_path, watchdog=TWO_WATCHDOGS)]))
    inspections = [{"id": "i1", "version_id": "v9", "product_id": "doc", "assessment": "needs_revision", "round": 2,
                    "author": "watchdog-security"},
                   {"id": "i2", "version_id": "v9", "product_id": "doc", "assessment": "approved", "round": 2,
                    "author": "watchdog-quality"}]
    findings = [{"id": "f1", "inspection_id": "i1", "category": "security", "severity": 6,
                 "issue": "The price list is editable by anyone."}]
    shown = prompt(graph, snapshot(inspections=inspections, findings=findings), team, "envoy-1", Step.PRESENTATION)
    assert section(shown.user, "Why: each Watchdog's verdict and findings") == [
        "- Brief, version 1: needs_revision by watchdog-security (focus: security)",
        "  - [security, severity 6] The price list is editable by anyone.",
        "- Brief, version 1: approved by watchdog-quality (focus: completeness, coherence, integration, quality)"
        " (no findings)"]


def test_the_inspector_reads_the_feedback_items_a_peer_review_points_at(graph) -> None:
    team = Team.build(2, load_role_cards())
    reviews = [{"id": "r1", "version_id": "v9", "product_id": "doc", "assessment": "needs_revision", "round": 2,
                "author": "operative-2", "summary": "Two feasibility fixes below."}]
    collabs = [collab("c1", "concern", 7, "Plus at 6 euros cannot cover the sync servers."),
               collab("c2", "suggestion", 4, "Say which plan students get."),
               collab("c3", "feedback", 5, "An older note.", round_number=1)]  # not written with this review
    shown = prompt(graph, snapshot(reviews=reviews, collabs=collabs), team, "watchdog-1", Step.INSPECT)
    block = section(shown.user, "New versions to inspect")
    assert block[block.index("Peer reviews:"):] == [
        "Peer reviews:",
        "- operative-2: needs_revision: Two feasibility fixes below.",
        "  - c2 on p1 about p1.v1 [concern, importance 7] by operative-2 (round 2): Plus at 6 euros cannot cover the "
        "sync servers.",
        "  - c3 on p1 about p1.v1 [suggestion, importance 4] by operative-2 (round 2): Say which plan students get."]


def test_bootstrap_says_which_names_and_personas_the_users_cards_give(graph, tmp_path: Path) -> None:
    team = Team.build(None, load_role_cards([cards_in(tmp_path, operative=NAMED_OPERATIVE)]),
                      names={"operative-pricing": "Pat"})
    view = snapshot(0, products={}, versions=[])
    shown = prompt(graph, view, team, "chair-1", Step.BOOTSTRAP)
    assert section(shown.user, "The team") == [
        "- chair-1 (chair)",
        "- operative-research (operative), from the user's card: named Rae; persona: A user researcher who turns "
        "interviews into findings.; domain: Interviews",
        "- operative-pricing (operative), from the user's card: named Pat",
        "- watchdog-1 (watchdog)",
        "- envoy-1 (envoy)",
        "Names and personas from the user's cards stay as given: write personas only for chair-1, operative-pricing, "
        "watchdog-1, envoy-1; a domain for every operative, within its card's."]
    assert shown.facts is not None and shown.facts.given_personas == ("operative-research",)
    # The user's persona stays the agent's, whatever the Chair's charter wrote for it.
    view.mission["personas"] = '{"operative-research": "A generalist.", "operative-pricing": "A pricing analyst."}'
    own = [prompt(graph, view, team, agent, Step.REFLECT).text(Block.AGENT) for agent in team.ids()[1:3]]
    assert "A user researcher who turns interviews into findings." in own[0] and "A generalist." not in own[0]
    assert "A pricing analyst." in own[1]


def test_plan_shows_the_definition_of_done_of_every_open_product(graph) -> None:
    team = Team.build(2, load_role_cards())
    shown = prompt(graph, snapshot(), team, "chair-1", Step.PLAN)
    assert section(shown.user, "Open products' definitions of done") == ["- p1 Brief: Names two plans and their prices."]


def test_bootstrap_and_plan_list_the_missions_tools_and_who_may_call_them(graph) -> None:
    team = Team.build(2, load_role_cards())
    prices = ToolServerSpec(name="prices", command="python", args=(str(SERVERS), "stdio", "prices"),
                            allow=("operatives", "chair-1"), steps=(Step.WRITE, Step.PLAN))
    with ToolHost([prices], timeout_s=10).start() as host:
        tools = tuple(team_tools(host, team))
    callers, steps = ("chair-1", "operative-1", "operative-2"), (Step.PLAN, Step.WRITE)
    assert [(t.name, t.callers, t.steps) for t in tools] == [("prices__lookup", callers, steps),
                                                              ("prices__environment", callers, steps)]
    title = ("The team's tools (a directive may tell an agent to use one; an agent makes at most 5 tool calls in "
             "one turn, one call a reply)")
    for view, step in ((snapshot(0, products={}, versions=[]), Step.BOOTSTRAP), (snapshot(), Step.PLAN)):
        shown = prompt(graph, view, team, "chair-1", step, tools)
        assert section(shown.user, title)[0] == (
            "- prices__lookup, for chair-1, operative-1, operative-2 at Plan & Assign, Write: The monthly price of a "
            "competitor's product, by its name. (tool of the 'prices' server)")
        assert shown.facts is not None and shown.facts.tools == tools


def test_an_endorsement_needs_no_answer_blocks_nothing_and_stays_in_view(graph) -> None:
    team = Team.build(2, load_role_cards())
    praise = collab("c1", "endorsement", 8, "The comparison table is exactly right.")
    concern = collab("c2", "concern", 6, "The student price is missing.")
    view = snapshot(collabs=[praise, concern])
    assert [c["id"] for c in view.open_collabs("doc")] == ["c2"]
    assert view.blocking_collabs("doc") == []
    shown = prompt(graph, view, team, "operative-1", Step.REFLECT)
    block = section(shown.user, "Your products")
    assert block[block.index("Open collabs on it:"):] == [
        "Open collabs on it:",
        "- c2 on p1 about p1.v1 [concern, importance 6] by operative-2 (round 2): The student price is missing.",
        "Endorsements of it (keep what they praise; no answer needed):",
        "- c1 on p1 about p1.v1 [endorsement, importance 8] by operative-2 (round 2): The comparison table is exactly "
        "right."]
    assert shown.facts is not None and shown.facts.products[0].open_collabs == ("c2",)
    assert "1 open collab(s)" in section(shown.user, "Product tree")[0]
    # Answered anyway, it is no mistake.
    answer = Reflection(refersToProduct="doc", dodStatus="partially_met", dodGaps=[], nextVersionDelta="Add it.",
                        feedbackResponses=[FeedbackResponse(collabId="c1", action="accept", rationale="Kept.")])
    assert ABOUT_RULES["owned_product"](answer, RuleContext(view, team, "operative-1")) == []


def test_a_run_lists_its_tools_to_the_chair_unless_no_call_may_be_made(graph_server, tmp_path: Path) -> None:
    bootstraps: list[str] = []

    def answer(request: ModelRequest):
        if request.facts is not None and request.facts.step == Step.BOOTSTRAP:
            bootstraps.append(request.messages[1].text)
        return played.bind_tools(list(request.tools)).invoke(list(request.messages),
                                                             config={"metadata": dict(request.metadata)})

    line = ("- prices__lookup, for operative-1 at Reflect, Write: The monthly price of a competitor's product, by its "
            "name. (tool of the 'prices' server)")
    for folder, settings in (("calls", {}), ("none", {"max_tool_calls": 0})):
        (tmp_path / folder).mkdir()
        path = tools_mission(tmp_path / folder, **settings)
        played = ScriptedChatModel.from_file(path.parent / "script.yaml")
        run_mission(path, model=FunctionChatModel(answer), home=graph_server.home, rounds=1)
    assert [line in prompt for prompt in bootstraps] == [True, False]
