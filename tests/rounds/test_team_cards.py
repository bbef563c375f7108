"""Role cards declare the team: members, several Watchdogs of different focus, named Operatives.

A card in a folder the mission names (``team: {cards: DIR}``) overrides the built-in card of its
kind; a bad card is a located error naming the file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from cabal import transcript as cabal_transcript
from cabal.entities import Acceptance, Inspection
from cabal.errors import ConfigError, ProtocolLoadError
from cabal.graph import ContextGraph
from cabal.rounds.api import run_mission
from cabal.rounds.rules import ABOUT_RULES, RuleContext
from cabal.rounds.snapshot import Snapshot
from cabal.rounds.team import Team, load_role_cards
from cabal.vocabulary import AGENT_ID, Role, Step, is_agent_id, role_of

ROOT = Path(__file__).resolve().parents[2]
TEAM_EXAMPLE = ROOT / "examples" / "team" / "team.mission.yaml"

TWO_WATCHDOGS = """\
role: watchdog
members:
  - {id: watchdog-security, name: Sol, focus: [security]}
  - {id: watchdog-quality, name: Quinn, focus: [completeness, coherence, integration, quality]}
"""


def cards_in(folder: Path, **cards: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in cards.items():
        (folder / f"{name}.yaml").write_text(text)
    return folder


def test_a_card_from_a_missions_folder_adds_a_watchdog_that_acts(graph_server, tmp_path):
    cards = cards_in(tmp_path / "cards", watchdog=TWO_WATCHDOGS)
    mission = {"name": "cards", "request": "Write a short privacy note for a notes app.", "rounds": 1,
               "team": {"operatives": 1, "cards": str(cards)}, "model": "py:cabal.rounds.simulated:team"}
    result = run_mission(mission, home=graph_server.home)
    assert result.state == "done"
    with ContextGraph.open(name=result.mission_id, home=graph_server.home) as graph:
        inspections = graph.find("inspection")
        findings = {f["inspection_id"]: f["category"] for f in graph.find("finding")}
        agents = {a["id"]: a.get("name") for a in graph.find("agent")}
    by_author = {}
    for inspection in inspections:
        by_author.setdefault(inspection["author"], set()).add(findings[inspection["id"]])
    assert by_author == {"watchdog-security": {"security"}, "watchdog-quality": {"completeness"}}
    assert agents["watchdog-security"] == "Sol" and "watchdog-1" not in agents


def test_named_operatives_replace_the_counted_ones(tmp_path):
    folder = cards_in(tmp_path, operative="role: operative\nmembers:\n  - {id: operative-research, name: Rae, "
                                         "domain: interviews, skills: [decision_capture], model: claude-haiku-4-5}\n"
                                         "  - {id: operative-pricing}\n")
    team = Team.build(None, load_role_cards([folder]), names={"operative-pricing": "Pat"})
    assert team.ids(Role.OPERATIVE) == ["operative-research", "operative-pricing"]
    research = team.get("operative-research")
    assert (research.name, research.domain, research.skills, research.model) == (
        "Rae", "interviews", ("decision_capture",), "claude-haiku-4-5")
    assert team.get("operative-pricing").name == "Pat"
    assert team.cards[Role.OPERATIVE].steps == load_role_cards()[Role.OPERATIVE].steps  # the rest is built in
    with pytest.raises(ConfigError, match=r"^team.operatives: the operative card .*operative.yaml names the operatives"):
        Team.build(2, load_role_cards([folder]))
    with pytest.raises(ConfigError, match=r"^team.names: no agent 'operative-1' on this team \(closest: "):
        Team.build(None, load_role_cards([folder]), names={"operative-1": "Ada"})


def test_a_counted_team_keeps_its_ids():
    team = Team.build(3, load_role_cards())
    assert team.ids() == ["chair-1", "operative-1", "operative-2", "operative-3", "watchdog-1", "envoy-1"]
    assert Team.build(None, load_role_cards()).ids(Role.OPERATIVE) == ["operative-1", "operative-2"]


@pytest.mark.parametrize(("cards", "problem"), [
    ({"researcher": "role: researcher\n"}, "researcher.yaml:1 field 'role': unknown kind 'researcher' (closest: "),
    ({"envoy": "role: envoy\nspeaks_as: [chair-1, everyone]\n"},
     "envoy.yaml:2 field 'speaks_as': speaks_as names 'everyone': an agent id"),
    ({"watchdog": "role: watchdog\nsteps:\n  inspect:\n    writes:\n      - {field: inspections, protocol: "
                  "inspect_version, about: new_versions}\n"},
     "watchdog.yaml step 'inspect' field 'writes': writes[0]: unknown rule 'new_versions' in `about` (closest: "
     "new_version"),
    ({"helper": "title: Helper\n"}, "helper.yaml:1 field 'role': a role card needs `role:`, its kind"),
    ({"watchdog": "role: watchdog\nmembers:\n  - {id: watchdog-a}\n  - {id: watchdog-a}\n"},
     "watchdog.yaml field 'members': duplicate id 'watchdog-a' (also in "),
    ({"watchdog": "role: watchdog\nsteps: {}\nmembers:\n  - {id: watchdog-a}\n"},
     "watchdog.yaml field 'steps': the watchdog card names members but no step they act in: no step can use them"),
    ({"watchdog": "role: watchdog\nmembers:\n  - {id: watchdog-a, focus: [securty]}\n"},
     "watchdog.yaml:3 field 'members[0].focus': unknown finding category 'securty' (closest: security"),
    ({"watchdog": "role: watchdog\nmembers:\n  - {id: operative-a}\n"},
     "watchdog.yaml:3 field 'members[0].id': id 'operative-a' is not a watchdog id"),
    ({"chair": "role: chair\nmembers:\n  - {id: chair-1}\n  - {id: chair-2}\n"},
     "chair.yaml field 'members': a team has one chair, chair-1; its card may name it, not others"),
    ({"operative": "role: operative\nmembers:\n  - {id: operative-a, skils: [x]}\n"},
     "operative.yaml:3 field 'members[0].skils': unknown field 'skils' (closest: skills"),
    ({"operative": "role: operative\nmembers:\n  - {id: operative-a, model: ''}\n"},
     "operative.yaml:3 field 'members[0].model': `model` is a non-empty line of plain text"),
    ({"a": "role: watchdog\n", "b": "role: watchdog\n"}, "b.yaml field 'role': a second watchdog card in this folder"),
])
def test_a_bad_card_is_a_located_error(tmp_path, cards, problem):
    folder = cards_in(tmp_path, **cards)
    with pytest.raises(ProtocolLoadError) as error:
        load_role_cards([folder])
    assert len(error.value.problems) == 1
    assert str(error.value).startswith(str(folder / problem.split(" ", 1)[0].split(":")[0]))
    assert problem in str(error.value)


def snapshot(**tables) -> Snapshot:
    base = dict(round=2, mission={"id": "m"}, agents={}, products={}, versions=[], collabs=[], assignments=[],
                reflections=[], reviews=[], inspections=[], findings=[], acceptances=[], remarks=[], halts=[],
                messages=[], turns=[])
    return Snapshot(**{**base, **tables})


def test_a_version_is_accepted_only_when_every_watchdog_allows_it(tmp_path):
    team = Team.build(None, load_role_cards([cards_in(tmp_path, watchdog=TWO_WATCHDOGS)]))
    product = {"id": "doc", "name": "Brief", "type": "Content", "parent_id": None, "owner": "operative-1",
               "status": "open"}
    version = {"id": "v2", "product_id": "doc", "number": 2, "round": 1, "author": "operative-1"}
    passed = {"id": "i1", "version_id": "v2", "product_id": "doc", "assessment": "approved", "round": 1,
              "author": "watchdog-quality"}
    met = {"id": "r1", "product_id": "doc", "dod_status": "met", "round": 2}
    accept = Acceptance(productId="doc", accepted=True, versionId="v2")

    def problems(*inspections):
        view = snapshot(products={"doc": product}, versions=[version], inspections=list(inspections),
                        reflections=[met])
        return ABOUT_RULES["acceptable_version"](accept, RuleContext(view, team, "chair-1")), view

    found, view = problems(passed)
    assert found == ["version 2 of 'Brief' has not been inspected yet by watchdog-security"]
    assert view.verdict_of("v2", team.ids(Role.WATCHDOG)) is None
    revise = dict(passed, id="i2", author="watchdog-security", assessment="needs_revision")
    found, view = problems(passed, revise)
    assert found == ["version 2 of 'Brief' did not pass watchdog-security's inspection (needs_revision)"]
    assert view.verdict_of("v2", team.ids(Role.WATCHDOG)) == "needs_revision"
    found, view = problems(passed, dict(revise, assessment="approved"))
    assert found == [] and view.verdict_of("v2", team.ids(Role.WATCHDOG)) == "approved"


def test_a_watchdog_reports_only_findings_of_its_focus(tmp_path):
    team = Team.build(None, load_role_cards([cards_in(tmp_path, watchdog=TWO_WATCHDOGS)]))
    view = snapshot(versions=[{"id": "v1", "product_id": "doc", "number": 1, "round": 2}])
    finding = {"category": "quality", "severity": 2, "issue": "long", "recommendation": "cut"}
    item = Inspection(productId="doc", versionId="v1", assessment="approved", findings=[finding])
    assert ABOUT_RULES["new_version"](item, RuleContext(view, team, "watchdog-security")) == [
        "findings.0: category 'quality' is outside your focus (security); another watchdog inspects it"]
    assert ABOUT_RULES["new_version"](item, RuleContext(view, team, "watchdog-quality")) == []


def test_agent_ids_follow_one_pattern():
    assert [role_of(i) for i in ("chair-1", "operative-12", "operative-pricing", "watchdog-security")] == [
        Role.CHAIR, Role.OPERATIVE, Role.OPERATIVE, Role.WATCHDOG]
    assert not any(is_agent_id(i) for i in ("researcher-1", "operative-", "operative-A", "operative--x", "user",
                                            "operative-" + "x" * 60))
    assert AGENT_ID.pattern.startswith("^(?:chair|operative|watchdog|envoy)-")


def test_the_team_example_runs_offline_and_shows_each_member_at_work(graph_server):
    result = run_mission(TEAM_EXAMPLE, home=graph_server.home)
    # The pricing passes both Watchdogs in round 1 and is accepted then; the research, after Sol's
    # revision, in round 2, whose closing decisions end the mission.
    assert (result.state, result.stop_reason, result.round) == ("done", "concluded", 2)
    transcript = cabal_transcript(result.mission_id, home=graph_server.home)
    for agent in ("Rae (operative-research)", "Pat (operative-pricing)"):  # each shown by its card's name
        assert f"by {agent}" in transcript
    assert "inspection by Sol (watchdog-security): needs_revision" in transcript
    assert transcript.count("inspection by Quinn (watchdog-quality): approved") == 3
    assert transcript.count("inspection by Sol (watchdog-security): approved") == 2



def test_the_team_example_runs_with_the_simulated_team_too(graph_server):
    result = run_mission(TEAM_EXAMPLE, model="simulated", rounds=1, home=graph_server.home)
    assert result.state == "done"
    transcript = cabal_transcript(result.mission_id, home=graph_server.home)
    for agent in ("Rae (operative-research)", "Pat (operative-pricing)"):
        assert f"Written in round 1 by {agent}." in transcript
    products = transcript.count("inspection by Sol (watchdog-security): approved")
    assert products > 0 and transcript.count("inspection by Quinn (watchdog-quality): approved") == products
    assert "- r1 inspect Sol (watchdog-security): final" in transcript
    assert "- r1 inspect Quinn (watchdog-quality): final" in transcript

def test_the_web_pages_team_example_finds_its_cards_next_to_it():
    from cabal.web.forms import example_launch

    launch = example_launch("team", answer_myself=False)
    assert launch.mission["team"]["cards"] == str(TEAM_EXAMPLE.parent / "cards")
    assert launch.model == f"scripted:{TEAM_EXAMPLE.parent / 'team.script.yaml'}"


def test_the_envoys_persona_is_a_reporters_and_the_chair_acts_at_close() -> None:
    cards = load_role_cards()
    assert cards[Role.ENVOY].persona.startswith(
        "You are the team's voice to the user: you report, you never review or judge the work yourself.")
    assert "usability" not in cards[Role.ENVOY].persona
    assert [(w.field, w.protocol, w.about) for w in cards[Role.CHAIR].steps[Step.CLOSE]] == [
        ("acceptance", "decide_acceptance", "acceptable_version"), ("remarks", "add_remark", "known_recipients")]
    assert ("feedbackResponses", "answer_feedback", "answerable_collab") in [
        (w.field, w.protocol, w.about) for w in cards[Role.OPERATIVE].steps[Step.WRITE]]
