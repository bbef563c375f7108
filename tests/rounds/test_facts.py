"""A turn's facts and its prompt say the same thing, with the same short ids.

Fake models read ``ModelRequest.facts`` instead of parsing prompt text; these tests hold the
two renderings together over the whole launch example, turn by turn.
"""

from __future__ import annotations

import threading

import pytest

from cabal.llm import FunctionChatModel, ModelRequest, ScriptedChatModel
from cabal.rounds.api import run_mission
from cabal.rounds.facts import TurnFacts
from cabal.vocabulary import Role, Step

from .players import LAUNCH_MISSION, LAUNCH_SCRIPT


@pytest.fixture(scope="module")
def seen(graph_server) -> list[tuple[str, TurnFacts]]:
    """(user prompt, facts) of every call of the launch example, played from its script."""
    script = ScriptedChatModel.from_file(LAUNCH_SCRIPT)
    calls: list[tuple[str, TurnFacts]] = []
    lock = threading.Lock()

    def answer(request: ModelRequest):
        with lock:
            calls.append((request.messages[1].text, request.facts))
        return script.bind_tools(list(request.tools)).invoke(list(request.messages),
                                                             config={"metadata": dict(request.metadata)})

    result = run_mission(LAUNCH_MISSION, model=FunctionChatModel(answer), home=graph_server.home)
    assert (result.state, result.stop_reason) == ("done", "concluded")
    return calls


def of_step(seen, step: Step) -> list[tuple[str, TurnFacts]]:
    return [(prompt, facts) for prompt, facts in seen if facts.step == step]


def test_every_call_carries_the_facts_of_its_turn(seen) -> None:
    assert seen and all(isinstance(facts, TurnFacts) for _, facts in seen)
    first_prompt, first = seen[0]
    assert (first.round, first.step, first.agent) == (0, Step.BOOTSTRAP, "chair-1")
    assert first.team == (("chair-1", Role.CHAIR), ("operative-1", Role.OPERATIVE), ("operative-2", Role.OPERATIVE),
                          ("watchdog-1", Role.WATCHDOG), ("envoy-1", Role.ENVOY))
    assert first.request in first_prompt


def test_the_tree_facts_are_the_tree_lines_shown(seen) -> None:
    for prompt, facts in seen:
        if facts.step == Step.BOOTSTRAP:
            assert facts.tree == ()
            continue
        assert facts.tree, facts.step
        for product in facts.tree:
            version = f"version {product.version}" if product.version else "no version"
            line = (f"{'  ' * product.depth}{product.id} [{product.type}] {product.name} · owner {product.owner} · "
                    f"{product.status} · {version}")
            assert line in prompt, (facts.round, facts.step, facts.agent, line)


def test_write_facts_name_the_assignments_shown_with_their_directives(seen) -> None:
    writes = of_step(seen, Step.WRITE)
    assert {(f.round, f.agent, len(f.assignments)) for _, f in writes} == {
        (1, "operative-1", 1), (1, "operative-2", 1), (2, "operative-1", 1), (2, "operative-2", 1)}
    for prompt, facts in writes:
        for assignment in facts.assignments:
            product = assignment.product
            assert f"### {product.id} {product.name} [{product.type}]" in prompt
            assert f"\nObjective: {assignment.objective}\n" in prompt
            if product.latest:
                assert f"Latest version: {product.latest.id} (by {product.latest.author} in round " in prompt


def test_review_and_inspection_facts_are_the_version_heads_shown(seen) -> None:
    judged = of_step(seen, Step.PEER_REVIEW) + of_step(seen, Step.INSPECT)
    assert judged
    for prompt, facts in judged:
        assert facts.new_versions
        for version in facts.new_versions:
            assert f"\n{version.id} (by {version.author} in round " in prompt


def test_plan_facts_are_the_reflections_and_candidates_shown(seen) -> None:
    plans = of_step(seen, Step.PLAN)
    assert any(f.candidates for _, f in plans) and any(f.reflections for _, f in plans)
    for prompt, facts in plans:
        for reflection in facts.reflections:
            assert f"- {reflection.author} on {reflection.product} " in prompt
            assert f": DoD {reflection.dod_status}\n" in prompt
        for candidate in facts.candidates:
            assert f"### {candidate.product} {candidate.name}: latest version {candidate.version} (by " in prompt
            assert candidate.version == f"{candidate.product}.v{candidate.number}"
            assert f"\nVerdict: {candidate.verdict}" in prompt


def test_presentation_facts_are_the_event_lines_and_speakers_shown(seen) -> None:
    presentations = of_step(seen, Step.PRESENTATION)
    assert presentations
    for prompt, facts in presentations:
        assert facts.events
        for event in facts.events:
            assert event.text in prompt and event.text.startswith(f"- {event.agent} ")
        assert f"You may speak as: {', '.join(facts.speakers)}." in prompt
