"""The gate check as a pure function: what counts, and the reason given when it fails."""

from __future__ import annotations

from cabal.procedures import LinkRequirement, NodeRequirement, Selector, Validation
from cabal.procedures.validation import unmet

from tests.procedures.helpers import narrative

GATE = Validation(
    requires=(NodeRequirement(Selector("narrative", "option"), 2, ("content",)),),
    links=(LinkRequirement("about", Selector("narrative", "option"), Selector("narrative", "question"), 2),),
)


def test_empty_run_space_fails_every_requirement_with_counts():
    assert unmet(GATE, [], [], {}) == [
        "the run space needs at least 2 narrative of type 'option' with content filled; found 0",
        "the run space needs at least 2 'about' link(s) from a narrative of type 'option' "
        "to a narrative of type 'question'; found 0",
    ]


def test_unfilled_fields_and_wrong_types_do_not_count():
    contents = [
        narrative("o1", "option", content="A"),
        narrative("o2", "option", content=""),
        narrative("x", "question", content="Q"),
    ]
    assert unmet(Validation(requires=GATE.requires), contents, [], {}) == [
        "the run space needs at least 2 narrative of type 'option' with content filled; found 1"
    ]


def test_links_count_from_run_space_nodes_to_matching_targets_anywhere():
    contents = [narrative("o1", "option", content="A"), narrative("o2", "option", content="B")]
    outside_question = narrative("q", "question")
    links = [
        {"type": "about", "from": "o1", "to": "q", "properties": {}},
        {"type": "relates", "from": "o2", "to": "q", "properties": {}},  # wrong type
        {"type": "about", "from": "elsewhere", "to": "q", "properties": {}},  # source not in the run
    ]
    nodes = {node["id"]: node for node in [*contents, outside_question]}
    assert unmet(GATE, contents, links, nodes) == [
        "the run space needs at least 2 'about' link(s) from a narrative of type 'option' "
        "to a narrative of type 'question'; found 1"
    ]
    links[1] = {"type": "about", "from": "o2", "to": "q", "properties": {}}
    assert unmet(GATE, contents, links, nodes) == []
