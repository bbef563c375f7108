"""Short ids mean one thing for the whole mission, in every prompt of every step and round.

The launch example is played from its script with a few answers changed: operative-1's review
names a version as a bare word, the Watchdog first gives an id of the old kind, the user leaves
a note after round 1 and a reviewer adds a collab in round 2, after the note. The Chair keeps the
checklist open at round 2's closing decisions, so the mission goes on to rounds 3 and 4 (where
the launch example ends in round 2) and later rounds show the ids. Every prompt is kept with the
short ids it showed (``ContextBuilder.build``'s ``Prompt.ids``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cabal.graph import ContextGraph
from cabal.rounds.api import resume_mission, run_mission
from cabal.rounds.context import ContextBuilder, Prompt
from cabal.rounds.control import say, stop_mission
from cabal.rounds.events import MissionEvent, TurnDone
from cabal.rounds.ids import TempIds

from .players import LAUNCH_MISSION, ScriptPlayer, tool_feedback

PRICING_V1 = "r1.write.operative-2.write_version0"
BRIEF_V1 = "r1.write.operative-1.write_version0"
NOTE = "Keep the student price under 4 euros a month."
BARE = "As p2.v1 stands, compare it with one competitor; `p2` and p9 stay as written."
SUPPORT = "Add who answers support mail on launch day."


@dataclass(frozen=True)
class Built:
    key: tuple[int, str, str]  # (round, step, agent)
    text: str  # the user message: the charter, then the call's own part
    ids: TempIds


@pytest.fixture(scope="module")
def home(graph_server) -> Path:
    return graph_server.home


@pytest.fixture(scope="module")
def built() -> Iterator[list[Built]]:
    """Every prompt the missions of this module build, in order."""
    prompts: list[Built] = []
    build = ContextBuilder.build

    def kept(self: ContextBuilder, agent_id: str, step, **kwargs) -> Prompt:
        prompt = build(self, agent_id, step, **kwargs)
        prompts.append(Built((self.snapshot.round, str(step), agent_id), prompt.user, prompt.ids))
        return prompt

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ContextBuilder, "build", kept)
        yield prompts


def _answer(key: tuple[int, str, str]) -> dict:
    return {"tool": "final_output", "args": ScriptPlayer().script_answer(key)}


def _final(args: dict) -> dict:
    return {"tool": "final_output", "args": args}


def _open_until_round_4() -> dict[tuple[int, str, str], list[dict]]:
    """Answers that keep the launch mission going to round 4: round 2's closing decisions accept
    the pricing and leave the checklist to its owner's Reflect; round 3 accepts it at the Plan;
    round 4's Plan ends the mission."""
    close_2 = _answer((2, "close", "chair-1"))
    close_2["args"]["acceptance"][1] = {"productId": "p3", "accepted": False,
                                        "rejectionReason": "Its owner reports on its DoD at the next Reflect first."}
    del close_2["args"]["done"]
    told = {"reasoning": "I told the user what each agent did this round, in the order it happened."}
    return {
        (2, "close", "chair-1"): [close_2],
        (2, "presentation", "envoy-1"): [_final({**told, "messages": [
            {"asAgent": "chair-1", "content": "Pricing is accepted; the checklist waits for its owner's report."}]})],
        (3, "reflect", "operative-1"): [_final({
            "reasoning": "I compared each product I own with its definition of done.",
            "reflections": [{"refersToProduct": "p3", "dodStatus": "met", "feedbackResponses": [],
                             "nextVersionDelta": "None; ready for acceptance."}]})],
        (3, "plan", "chair-1"): [_final({
            "thinking": {"roundStrategy": "Accept the checklist.",
                         "acceptanceRationale": "It meets its DoD and passed inspection."},
            "treeOperations": [], "assignments": [],
            "acceptance": [{"productId": "p3", "accepted": True, "versionId": "p3.v1"}]})],
        (3, "presentation", "envoy-1"): [_final({**told, "messages": [
            {"asAgent": "chair-1", "content": "The checklist is accepted, so the whole launch plan is ready."}]})],
        (4, "plan", "chair-1"): [{"tool": "halt", "args": {
            "type": "done", "to": ["u:all"], "message": "The launch plan is complete: every product is accepted."}}],
        (4, "presentation", "envoy-1"): [_final({**told, "messages": [
            {"asAgent": "chair-1", "content": "The launch plan is complete: every product is accepted."}]})],
    }


@pytest.fixture(scope="module")
def played(home: Path, built: list[Built]) -> tuple[ScriptPlayer, list[Built], str]:
    """The changed launch mission, played whole: its player, its prompts and its mission id."""
    review = _answer((1, "peer_review", "operative-1"))
    review["args"]["collabs"][0]["comment"] = BARE
    old_kind = _answer((1, "inspect", "watchdog-1"))
    old_kind["args"]["inspections"][0]["versionId"] = "v1"
    later = _answer((2, "peer_review", "operative-2"))
    later["args"]["collabs"] = [{"refersToProduct": "p3", "type": "suggestion", "importance": 3, "comment": SUPPORT,
                                 "shortestSummary": "Name the support owner"}]
    player = ScriptPlayer(inject={**_open_until_round_4(), (1, "peer_review", "operative-1"): [review],
                                  (1, "inspect", "watchdog-1"): [old_kind], (2, "peer_review", "operative-2"): [later]})

    def note_after_round_1(event: MissionEvent) -> None:
        if isinstance(event, TurnDone) and (event.step, event.round) == ("presentation", 1):
            say(event.mission, NOTE, home=home)

    start = len(built)
    result = run_mission(LAUNCH_MISSION, model=player.model(), home=home, on_event=note_after_round_1)
    assert (result.state, result.round) == ("done", 4)
    return player, built[start:], result.mission_id


def _meanings(prompts: list[Built]) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """What each short id named across the prompts, and which short ids each graph id had."""
    named: dict[str, set[str]] = {}
    called: dict[str, set[str]] = {}
    for prompt in prompts:
        for kind in "pvc":
            for alias in prompt.ids.shown(kind):
                real = prompt.ids.real(alias)
                assert real is not None
                named.setdefault(alias, set()).add(real)
                called.setdefault(real, set()).add(alias)
    return named, called


def _one_meaning_each(prompts: list[Built]) -> None:
    named, called = _meanings(prompts)
    assert {alias: reals for alias, reals in named.items() if len(reals) > 1} == {}
    assert {real: aliases for real, aliases in called.items() if len(aliases) > 1} == {}


def _prompt(prompts: list[Built], key: tuple[int, str, str]) -> Built:
    return next(p for p in prompts if p.key == key)


def test_every_prompt_of_the_mission_gives_an_id_one_meaning(played) -> None:
    _, prompts, _ = played
    named, called = _meanings(prompts)
    assert len({p.key[0] for p in prompts}) == 5 and len(prompts) > 20  # rounds 0 to 4
    _one_meaning_each(prompts)
    assert {alias: next(iter(reals)) for alias, reals in named.items() if alias[0] == "p"} == {
        "p1": "r0.bootstrap.chair-1.after1.add_product0", "p2": "r0.bootstrap.chair-1.after1.add_product1",
        "p3": "r0.bootstrap.chair-1.after1.add_product2", "p1.v1": BRIEF_V1, "p2.v1": PRICING_V1,
        "p2.v2": "r2.write.operative-2.write_version0", "p3.v1": "r2.write.operative-1.write_version0"}
    # The version is named alike wherever it is shown: write, review, inspection, plan, close.
    shown_in = {p.key for p in prompts if "p2.v1 (by operative-2 in round 1)" in p.text}
    assert {(1, "peer_review", "operative-1"), (1, "inspect", "watchdog-1"), (2, "plan", "chair-1")} <= shown_in
    assert called[PRICING_V1] == {"p2.v1"}


def test_two_prompts_of_one_step_name_a_version_alike(played) -> None:
    _, prompts, _ = played
    review_1 = _prompt(prompts, (1, "peer_review", "operative-1")).text
    review_2 = _prompt(prompts, (1, "peer_review", "operative-2")).text
    inspect = _prompt(prompts, (1, "inspect", "watchdog-1")).text
    assert "### p2 Pricing decision [Decision]" in review_1 and "\np2.v1 (by operative-2 in round 1): " in review_1
    assert "### p1 Launch brief [Content]" in review_2 and "\np1.v1 (by operative-1 in round 1): " in review_2
    assert "\np1.v1 (by operative-1 in round 1): " in inspect and "\np2.v1 (by operative-2 in round 1): " in inspect
    assert "## Valid ids\nproducts p1-p3 · versions p1.v1, p2.v1 · collabs c1-c2 · agents " in inspect


def test_a_note_left_later_takes_the_next_number_and_renumbers_nothing(played) -> None:
    _, prompts, _ = played
    plan_2 = _prompt(prompts, (2, "plan", "chair-1"))
    assert f"- c3 on the mission [user_independent, importance 6] by user (round 1): {NOTE}" in plan_2.text
    assert (plan_2.ids.real("c3"), plan_2.ids.real("c1")) == ("user.r1.note0", "r1.peer_review.operative-1.add_collab0")
    # The collab written after the note was read takes the number after it.
    reflect_3 = _prompt(prompts, (3, "reflect", "operative-1"))
    assert f"- c4 on p3 [suggestion, importance 3] by operative-2 (round 2): {SUPPORT}" in reflect_3.text
    assert reflect_3.ids.real("c4") == "r2.peer_review.operative-2.add_collab0"


def test_a_bare_id_in_an_answers_text_is_stored_as_a_reference_to_what_it_named(played, home: Path) -> None:
    _, prompts, mission_id = played
    with ContextGraph.open(name=mission_id, home=home) as graph:
        stored = graph.get("r1.peer_review.operative-1.add_collab0")["comment"]
    assert stored == f"As [[v:{PRICING_V1}]] stands, compare it with one competitor; `p2` and p9 stay as written."
    # Another reader sees it in the mission's ids.
    assert ("As [[v:p2.v1]] stands, compare it with one competitor; `p2` and p9 stay as written."
            in _prompt(prompts, (2, "reflect", "operative-2")).text)


def test_an_id_of_the_old_kind_is_refused_with_the_ids_known(played) -> None:
    player, _, _ = played
    first, retry = player.calls_of(1, "inspect", "watchdog-1")
    assert tool_feedback(retry.last) == ("Your answer was rejected (1 problem(s)); fix each:\n"
                                         "- inspections.0.versionId: unknown id 'v1'; known v-ids: p1.v1, p2.v1")


def test_a_resumed_mission_builds_the_same_prompts_with_the_same_ids(home: Path, built: list[Built]) -> None:
    start = len(built)
    run_mission(LAUNCH_MISSION, model=ScriptPlayer(inject=_open_until_round_4()).model(), home=home)
    whole = built[start:]

    def stop_after_round_2(event: MissionEvent) -> None:
        if isinstance(event, TurnDone) and (event.step, event.round) == ("presentation", 2):
            stop_mission(event.mission, home=home)

    start = len(built)
    stopped = run_mission(LAUNCH_MISSION, model=ScriptPlayer(inject=_open_until_round_4()).model(), home=home,
                          on_event=stop_after_round_2)
    assert (stopped.state, stopped.round) == ("done", 2)
    before = built[start:]
    went_on = resume_mission(stopped.mission_id, model=ScriptPlayer(inject=_open_until_round_4()).model(), home=home)
    assert (went_on.state, went_on.round) == ("done", 4)
    after = built[start + len(before):]

    # Operatives of one step build their prompts in parallel threads: compare by turn, not by order.
    assert after and sorted((p.key, p.text) for p in after) == sorted((p.key, p.text) for p in whole if p.key[0] >= 3)
    _one_meaning_each(before + after)
