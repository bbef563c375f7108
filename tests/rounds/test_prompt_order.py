"""A prompt's blocks run from the most shared to the least (``context.PROMPT_BLOCKS``), so a
provider's prompt cache serves the longest start: the house rules, the mission, the role and
step, the agent, then the call's own part."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cabal.llm import FunctionChatModel, ModelRequest, ScriptedChatModel
from cabal.rounds.api import run_mission

TEAM = Path(__file__).resolve().parents[2] / "examples" / "team"


@pytest.fixture(scope="module")
def calls(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[int, str, str], tuple[str, list[str]]]:
    """The team example's first call of each turn: (round, step, agent) -> (system text, user blocks)."""
    from cabal.graph import EmbeddedServer

    script = ScriptedChatModel.from_file(TEAM / "team.script.yaml")
    seen: dict[tuple[int, str, str], tuple[str, list[str]]] = {}

    def answer(request: ModelRequest):
        system, first = request.messages[0], request.messages[1]
        seen.setdefault((request.key.round, request.key.step, request.key.agent),
                        (system.text, [block["text"] for block in first.content]))
        return script.bind_tools(list(request.tools)).invoke(list(request.messages),
                                                              config={"metadata": dict(request.metadata)})

    home = tmp_path_factory.mktemp("order") / ".cabal"
    server = EmbeddedServer(home)
    server.start()
    try:
        result = run_mission(TEAM / "team.mission.yaml", model=FunctionChatModel(answer), home=home)
    finally:
        server.stop()
    assert result.state == "done", result.detail
    return seen


def test_two_watchdogs_inspect_prompts_are_the_same_up_to_their_own_block(calls) -> None:
    security_system, security = calls[2, "inspect", "watchdog-security"]
    quality_system, quality = calls[2, "inspect", "watchdog-quality"]

    assert security_system == quality_system
    assert security[:2] == quality[:2]  # the mission, then the role and step
    assert security[1].startswith("# Your role: the Watchdog\n\nYour step now: Inspect\n")
    assert security[2] != quality[2]
    assert security[2].endswith("You are Sol (watchdog-security).\n\nYour focus: security findings only; "
                                "the team's other watchdogs inspect the rest.")
    assert quality[2].endswith("You are Quinn (watchdog-quality).\n\nYour focus: completeness, coherence, "
                               "integration, quality findings only; the team's other watchdogs inspect the rest.")
    # Their personas come from the user's cards (a card's persona is the user's, never rewritten):
    # they part at the start of their own block.
    assert security[2].startswith("# Who you are\n\n") and quality[2].startswith("# Who you are\n\n")
    shared = os.path.commonprefix(["\n".join([security_system, *security]), "\n".join([quality_system, *quality])])
    assert shared.startswith("\n".join([security_system, *security[:2], "# Who you are\n\n"]))


def test_every_call_of_a_round_starts_with_the_mission(calls) -> None:
    round_two = {key: blocks for key, (_, blocks) in calls.items() if key[0] == 2}
    charter = round_two[2, "plan", "chair-1"][0].split("\n\n## The user's sources")[0]

    assert charter.startswith("## Mission\n")
    assert {step for _, step, _ in round_two} >= {"reflect", "plan", "write", "peer_review", "inspect"}
    assert all(blocks[0].startswith(charter) for blocks in round_two.values())
    # The steps that show the same items (sources, the user's words) show the same mission block,
    # whichever agent and role: a cache serves it to every one of them.
    shared = {blocks[0] for (_, step, _), blocks in round_two.items() if step in ("write", "peer_review", "inspect")}
    assert len(shared) == 1
