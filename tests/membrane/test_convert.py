"""One protocol format: an upstream file (ngram's dialect, or mind-mcp's newer format) is
translated into Cabal's own format before the one builder reads it, in memory or written out by
``cabal protocols convert``. The fixtures are those of test_dialect (tests/membrane/dialect/)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cabal.cli import main
from cabal.errors import ProtocolLoadError
from cabal.membrane import Membrane, dialect
from cabal.membrane.convert import convert_protocol
from cabal.membrane.library import ProtocolLibrary
from cabal.membrane.loader import load_protocol
from cabal.membrane.protocol import AskStep, CallStep, CreateStep
from cabal.yaml_reader import read_yaml

HERE = Path(__file__).parent / "dialect"
FIXTURES = sorted(HERE.glob("*.yaml"))
ACTOR = {"id": "agent-1", "node_type": "actor", "type": "agent", "name": "operative"}
CORE = {"actor_id": "agent-1", "space": "space_TEAM_core"}


def _unlocated(protocol):
    return {name: dataclasses.replace(step, line=None) for name, step in protocol.steps.items()}


def loaded(text: str, source: str):
    return load_protocol(text, source, protocol_exists=lambda name: True)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda path: path.stem)
def test_the_converted_file_loads_as_cabals_own_into_the_same_protocol(path, tmp_path):
    name, text = convert_protocol(path.read_text(), str(path))
    assert name == path.stem and not dialect.is_upstream(read_yaml(text, "converted"))
    original, converted = loaded(path.read_text(), str(path)), loaded(text, str(tmp_path / f"{name}.yaml"))
    assert (original.dialect, converted.dialect) == ("upstream", "cabal")
    assert _unlocated(converted) == _unlocated(original)
    assert (converted.first, converted.summary, converted.output, converted.dependencies, converted.docs) == (
        original.first, original.summary, original.output, original.dependencies, original.docs)
    assert converted.context is not None and original.context is None  # declared in the file written


def test_the_newer_format_becomes_calls_and_relates_links():
    protocol = ProtocolLibrary([HERE]).get("hand_off_task")
    steps = protocol.steps
    called = steps["need_goal-call1"]  # the check's {type: call_procedure} action
    assert isinstance(called, CallStep) and (called.protocol, dict(called.context), called.on_complete) == (
        "note_goal", {"space": "{space}"}, "pick_task")
    assert steps["need_goal"].checks == (("{goals|count} == 0", "need_goal-call1"), ("true", "pick_task"))
    follow = steps["follow_up"]  # a call_procedure step, `inputs` for its context
    assert isinstance(follow, CallStep) and (follow.protocol, dict(follow.context), follow.on_complete) == (
        "note_goal", {"space": "{space}"}, "$complete")
    handoff = steps["write_handoff"]
    assert isinstance(handoff, CreateStep)
    assert [(link.type, dict(link.properties)) for link in handoff.links] == [
        ("relates", {"nature": "hands over"}), ("contains", {})]
    assert protocol.docs["steps"] == {"follow_up": {"max_depth": 3}}
    assert isinstance(steps["pick_task"], AskStep)


def test_the_newer_format_runs_as_mind_mcps_runtime_runs_it(graph):
    graph.create_cluster(
        [ACTOR, {"id": "space_TEAM_core", "node_type": "space", "type": "team", "name": "Core"},
         {"id": "task-a", "node_type": "narrative", "type": "task", "name": "Task A", "status": "open"}],
        [{"type": "contains", "from": "space_TEAM_core", "to": "task-a"}])
    membrane = Membrane(graph, protocol_dirs=[HERE])
    started = membrane.start("hand_off_task", CORE, session_id="s-h")
    assert (started.protocol, started.step.id) == ("note_goal", "need_goal-call1.ask_goal")  # no goal yet
    picking = membrane.continue_session("s-h", {"title": "Ship v2"})
    assert picking.step.id == "pick_task" and picking.step.answer_schema["properties"]["task"]["enum"] == ["task-a"]
    following = membrane.continue_session("s-h", {"task": "task-a", "note": "Tests are green"})
    assert (following.protocol, following.step.id) == ("note_goal", "follow_up.ask_goal")
    done = membrane.continue_session("s-h", {"title": "Review the handoff"})
    assert (done.status, done.summary) == ("complete", "Handed over task-a")
    links = sorted((l["type"], l["to"], l["properties"].get("nature")) for l in graph.links_from("handoff_task-a"))
    assert links == [("relates", "task-a", "hands over")]
    assert graph.get("goal_ship-v2")["name"] == "Ship v2" and graph.get("goal_review-the-handoff")


def test_cabal_protocols_convert(tmp_path, capsys):
    out = tmp_path / "converted"
    assert main(["protocols", "convert", str(HERE), "-o", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == [p.name for p in FIXTURES]
    assert main(["protocols", "check", str(out)]) == 0  # each written file holds to Cabal's own checks
    capsys.readouterr()
    assert main(["protocols", "convert", str(HERE / "note_goal.yaml")]) == 0
    assert capsys.readouterr().out == (out / "note_goal.yaml").read_text()
    canonical = Path(__file__).parents[2] / "protocols" / "add_remark.yaml"
    assert main(["protocols", "convert", str(canonical), "-o", str(tmp_path / "none")]) == 0
    assert "already in Cabal's format; left out" in capsys.readouterr().err
    broken = tmp_path / "broken.yaml"
    broken.write_text("procedure: broken\nsteps:\n  a:\n    type: call_procedure\n    protocol: x\n    next: nowhere\n")
    assert main(["protocols", "convert", str(broken), "-o", str(tmp_path / "b")]) == 1
    assert capsys.readouterr().err == (f"{broken}:4 step 'a' field 'on_complete': on_complete points to 'nowhere', "
                                       "which is not a step of this protocol\n1 of 1 file(s) not converted (they do "
                                       "not load)\n")
    assert not (tmp_path / "b").exists()
    assert main(["protocols", "convert", str(HERE)]) != 0  # a folder needs -o
    assert capsys.readouterr().err == "cabal: converting a folder writes one file per protocol: give -o DIR\n"


def test_a_check_action_of_an_unknown_kind_is_located():
    text = ("procedure: p\nsteps:\n  b:\n    type: branch\n    checks:\n      - condition: ready\n"
            "        action: {type: call_elsewhere}\n")
    with pytest.raises(ProtocolLoadError) as caught:
        load_protocol(text, "p.yaml")
    assert str(caught.value.problems[0]) == ("p.yaml:6 step 'b' field 'checks.0.action': a check's action is "
                                             "{goto: step}, a call_protocol, a call_procedure or a complete")
