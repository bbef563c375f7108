"""The shipped v1 protocol library, run to completion against a real graph with the answers a capable agent gives.

Each test asserts the cluster the protocol created: node types, link types and counts, taken
from the prepared cluster (``run(..., commit=False)``) and then checked in the graph once it
is committed.
"""

from __future__ import annotations

from collections import Counter

import pytest

from cabal.errors import ProtocolRuntimeError
from cabal.membrane import Membrane
from cabal.doctor.gaps import GAP_KINDS, find_gaps

ACTOR = "actor-ada"


def said(answer, description="I read the module and its neighbours first", reasoning="the skill's process asks for it"):
    """An answer in its moment envelope: the answer, what the agent did, and why."""
    return {"answer": answer, "description": description, "reasoning": reasoning}


@pytest.fixture
def membrane(graph):
    graph.create_cluster(
        [
            {"id": ACTOR, "node_type": "actor", "type": "agent", "name": "Ada"},
            {"id": "mod-refunds", "node_type": "space", "type": "module", "name": "refunds"},
            {"id": "mod-empty", "node_type": "space", "type": "module", "name": "search"},
            {"id": "obj-refunds", "node_type": "narrative", "type": "objective", "name": "refund settled charges"},
            {"id": "beh-refund", "node_type": "narrative", "type": "behavior", "name": "refund request"},
            {"id": "beh-partial", "node_type": "narrative", "type": "behavior", "name": "partial refund"},
            {"id": "val-cap", "node_type": "narrative", "type": "validation", "name": "refunds never exceed capture"},
            {"id": "esc-disputes", "node_type": "narrative", "type": "escalation", "name": "refunds of disputed charges?"},
        ],
        [
            {"type": "contains", "from": "mod-refunds", "to": "obj-refunds"},
            {"type": "contains", "from": "mod-refunds", "to": "beh-refund"},
            {"type": "contains", "from": "mod-refunds", "to": "beh-partial"},
            {"type": "contains", "from": "mod-refunds", "to": "val-cap"},
            {"type": "ensures", "from": "val-cap", "to": "beh-refund"},
            {"type": "contains", "from": "mod-refunds", "to": "esc-disputes"},
            {"type": "about", "from": "esc-disputes", "to": "mod-refunds"},
        ],
    )
    return Membrane(graph)


def run(membrane, graph, protocol, context, answers):
    """Run a protocol to completion; returns (result, node shape, link shape) of what it committed."""
    prepared = membrane.run(protocol, {"actor_id": ACTOR, **context}, answers, commit=False)
    assert prepared.status == "complete", prepared
    cluster = prepared.cluster.to_wire()
    before = graph.counts()
    membrane.commit([prepared.cluster])
    after = graph.counts()
    nodes = Counter((n["node_type"], n["type"]) for n in cluster["nodes"])
    links = Counter(link["type"] for link in cluster["links"])
    # Every node the protocol prepared is new, and every link it prepared now exists.
    assert after["nodes"] - before["nodes"] == sum(nodes.values())
    assert after["links"] - before["links"] == sum(links.values())
    for node in cluster["nodes"]:
        assert graph.get(node["id"]) is not None
    return prepared, cluster, nodes, links


def linked(graph, link_type, source, target):
    return any(link["to"] == target for link in graph.links_from(source, link_type))


def moments_of(cluster, kind=None):
    return [n for n in cluster["nodes"] if n["node_type"] == "moment" and (kind is None or n["type"] == kind)]


def gap_nodes(graph, kind):
    return {gap.node_id for gap in find_gaps(graph, [kind])}


# ------------------------------------------------------------------------------- explore_space


def test_explore_space_records_one_exploration_moment(membrane, graph):
    answers = {
        "exploration": said(
            {
                "summary": "refunds holds one objective, two behaviors, one validation and an open escalation.",
                "missing": ["partial refund has no validation", "no implementation narrative"],
                "unknowns": ["which service owns the processor callback"],
            }
        )
    }
    result, cluster, nodes, links = run(membrane, graph, "explore_space", {"space_id": "mod-refunds"}, answers)
    assert nodes == Counter({("moment", "exploration"): 1})
    assert links == Counter({"expresses": 1, "about": 1})
    (moment,) = moments_of(cluster)
    assert linked(graph, "about", moment["id"], "mod-refunds") and linked(graph, "expresses", ACTOR, moment["id"])
    assert moment["prose"] == "I read the module and its neighbours first"
    assert result.summary.startswith("explored mod-refunds: refunds holds one objective")


def test_explore_space_shows_the_space_in_its_question(membrane):
    started = membrane.start("explore_space", {"actor_id": ACTOR, "space_id": "mod-refunds"})
    question = started.step.question
    assert "beh-partial" in question and "esc-disputes" in question  # the query ran before the ask


def test_explore_space_needs_an_existing_space(membrane):
    with pytest.raises(ProtocolRuntimeError, match="mod-nowhere does not exist"):
        membrane.start("explore_space", {"actor_id": ACTOR, "space_id": "mod-nowhere"})


# ------------------------------------------------------------------------------ add_objectives

OBJECTIVES = {
    "primary": said("Any caller gets a search result for a catalog query within 300 ms at p99."),
    "secondary": said(
        [
            "Results reflect a product edit within 60 s; freshness yields to latency under load.",
            "Every query is logged for relevance tuning, after the response is sent.",
        ]
    ),
    "non_objectives": said(
        ["Not price computation: pricing owns prices.", "Not recommendations: the recs module owns them."]
    ),
}


def test_add_objectives_primary_secondary_and_non_objectives(membrane, graph):
    assert gap_nodes(graph, "module_without_objectives") == {"mod-empty"}
    _, cluster, nodes, links = run(membrane, graph, "add_objectives", {"space_id": "mod-empty"}, OBJECTIVES)
    assert nodes == Counter(
        {("narrative", "objective"): 3, ("narrative", "non_objective"): 2, ("moment", "objective"): 2,
         ("moment", "boundary"): 1}
    )  # fmt: skip
    # contains: 3 objectives + 2 non-objectives; relates: 2 secondary + 2 non-objectives to the primary
    assert links == Counter({"contains": 5, "relates": 4, "expresses": 3, "about": 3})
    primary = next(n for n in cluster["nodes"] if n.get("priority") == "primary")
    assert primary["content"] == OBJECTIVES["primary"]["answer"]
    assert [n["rank"] for n in cluster["nodes"] if n.get("priority") == "secondary"] == [0, 1]
    assert all(linked(graph, "contains", "mod-empty", n["id"]) for n in cluster["nodes"] if n["node_type"] == "narrative")
    assert gap_nodes(graph, "module_without_objectives") == set()


def test_add_objectives_creates_a_missing_module_first(membrane, graph):
    answers = {
        "objectives_new_module.module_sketch": said(
            {"name": "ledger", "purpose": "Keeps the double-entry record of every money movement."}
        ),
        **OBJECTIVES,
        "secondary": said([]),
    }
    _, cluster, nodes, links = run(membrane, graph, "add_objectives", {"space_id": "mod-ledger"}, answers)
    assert nodes == Counter(
        {("space", "module"): 1, ("narrative", "objective"): 1, ("narrative", "non_objective"): 2,
         ("moment", "module_definition"): 1, ("moment", "objective"): 2, ("moment", "boundary"): 1}
    )  # fmt: skip
    assert links == Counter({"contains": 3, "relates": 2, "expresses": 4, "about": 4})
    assert graph.get("mod-ledger")["name"] == "ledger"
    assert "mod-ledger" not in gap_nodes(graph, "module_without_objectives")


# ------------------------------------------------------------------------------- add_invariant

RULE = {
    "name": "Partial refunds stay under capture",
    "statement": "For every charge, the sum of its confirmed partial refunds never exceeds the captured amount.",
    "check": "A property test over generated charges and refund sequences.",
}


def test_add_invariant_ensures_the_behaviors_picked(membrane, graph):
    assert gap_nodes(graph, "behavior_without_validation") == {"beh-partial"}
    answers = {"guarded_behaviors": said(["beh-partial"]), "rule": said(RULE)}
    _, cluster, nodes, links = run(membrane, graph, "add_invariant", {"space_id": "mod-refunds"}, answers)
    assert nodes == Counter({("narrative", "validation"): 1, ("moment", "selection"): 1, ("moment", "invariant"): 1})
    assert links == Counter({"contains": 1, "ensures": 1, "expresses": 2, "about": 2})
    validation = "validation-mod-refunds-partial-refunds-stay-under-capture"
    assert graph.get(validation)["content"] == RULE["statement"]
    assert linked(graph, "ensures", validation, "beh-partial")
    assert gap_nodes(graph, "behavior_without_validation") == set()


def test_add_invariant_adds_a_behavior_when_the_module_has_none(membrane, graph):
    answers = {
        "invariant_new_behavior.behavior_spec": said(
            {"name": "Query returns ranked hits", "observable": "A query returns hits ranked by relevance; an empty query is refused with 400."}
        ),
        "rule": said({**RULE, "name": "Hits are sorted by score", "statement": "For every result page, hit scores never increase down the page."}),
    }
    _, cluster, nodes, links = run(membrane, graph, "add_invariant", {"space_id": "mod-empty"}, answers)
    assert nodes == Counter(
        {("narrative", "behavior"): 1, ("narrative", "validation"): 1, ("moment", "behavior"): 1, ("moment", "invariant"): 1}
    )
    assert links == Counter({"contains": 2, "ensures": 1, "expresses": 2, "about": 2})
    assert linked(graph, "ensures", "validation-mod-empty-hits-are-sorted-by-score", "behavior-mod-empty-query-returns-ranked-hits")
    assert gap_nodes(graph, "behavior_without_validation") == {"beh-partial"}  # the new behavior is guarded


def test_add_invariant_refuses_a_node_that_is_not_a_behavior(membrane, graph):
    result = membrane.run(
        "add_invariant", {"actor_id": ACTOR, "space_id": "mod-refunds"},
        {"guarded_behaviors": said(["obj-refunds"]), "rule": said(RULE)},
    )  # fmt: skip
    assert result.status == "active"
    assert result.to_wire()["errors"] == [
        {"path": "guarded_behaviors.answer.0", "message": "node 'obj-refunds' has type='objective', expected type='behavior'"}
    ]


# ------------------------------------------------------------------------- add_health_coverage

HEALTH = {
    "name": "Refund totals vs captures",
    "signal": "Sum of confirmed refunds per charge against the captured amount.",
    "trigger": "Every 5 minutes",
    "threshold": "Any charge whose refunds exceed its capture, over windows ending 2 minutes ago.",
    "reaction": "Page the payments on-call.",
}
DOCKS = {
    "upstream": "refunds/service.py::plan_refund",
    "upstream_role": "The refund amount is decided",
    "downstream": "refunds/store.py::insert_refund",
    "downstream_role": "The refund row is committed",
}


def test_add_health_coverage_health_two_docks_and_verifies(membrane, graph):
    assert gap_nodes(graph, "validation_without_health") == {"val-cap"}
    answers = {"health": said(HEALTH), "docks": said(DOCKS)}
    _, cluster, nodes, links = run(membrane, graph, "add_health_coverage", {"validation_id": "val-cap"}, answers)
    assert nodes == Counter(
        {("narrative", "health"): 1, ("thing", "dock"): 2, ("moment", "health_design"): 1, ("moment", "docking"): 1}
    )
    # the health moment is about the validation and the health check; the docking moment about the check
    assert links == Counter({"verifies": 1, "docks": 2, "contains": 3, "expresses": 2, "about": 3})
    health = "health-val-cap-refund-totals-vs-captures"
    assert linked(graph, "verifies", health, "val-cap")
    assert linked(graph, "docks", "dock-refunds-service-py-plan-refund", health)
    assert linked(graph, "docks", "dock-refunds-store-py-insert-refund", health)
    assert linked(graph, "contains", "mod-refunds", health)
    assert gap_nodes(graph, "validation_without_health") == set()


def test_add_health_coverage_wants_docks_as_file_and_symbol(membrane):
    result = membrane.run(
        "add_health_coverage", {"actor_id": ACTOR, "validation_id": "val-cap"},
        {"health": said(HEALTH), "docks": said({**DOCKS, "upstream": "service.py line 40"})},
    )  # fmt: skip
    assert [e["path"] for e in result.to_wire()["errors"]] == ["docks.answer.upstream"]


def test_add_health_coverage_needs_a_validation(membrane):
    with pytest.raises(ProtocolRuntimeError, match="no validation beh-refund"):
        membrane.start("add_health_coverage", {"actor_id": ACTOR, "validation_id": "beh-refund"})


# -------------------------------------------------------------------------- add_implementation

IMPLEMENTATION = {
    "name": "Refund pipeline",
    "data_path": "create_refund checks the idempotency key, plan_refund decides the amount, insert_refund writes the row.",
}


def test_add_implementation_narrative_docks_and_implements(membrane, graph):
    assert "mod-refunds" in gap_nodes(graph, "module_without_implementation")
    answers = {
        "implementation": said(IMPLEMENTATION),
        "implementation_docks": said(
            {"entry": "refunds/api.py::create_refund", "core": "refunds/service.py::plan_refund",
             "persistence": "refunds/store.py::insert_refund"}
        ),
    }  # fmt: skip
    _, cluster, nodes, links = run(membrane, graph, "add_implementation", {"space_id": "mod-refunds"}, answers)
    assert nodes == Counter({("narrative", "implementation"): 1, ("thing", "dock"): 3, ("moment", "implementation"): 1,
                             ("moment", "docking"): 1})  # fmt: skip
    assert links == Counter({"contains": 4, "implements": 1, "docks": 3, "expresses": 2, "about": 2})
    implementation = "implementation-mod-refunds-refund-pipeline"
    assert linked(graph, "implements", implementation, "obj-refunds")
    assert {n["role"] for n in cluster["nodes"] if n["node_type"] == "thing"} == {"entry", "core", "persistence"}
    assert "mod-refunds" not in gap_nodes(graph, "module_without_implementation")


def test_add_implementation_spawns_add_module_for_a_missing_module(membrane, graph):
    answers = {
        "module.module_sketch": said({"name": "payouts", "purpose": "Pays merchants their settled balance daily."}),
        "implementation": said({**IMPLEMENTATION, "name": "Daily payout run"}),
        "implementation_docks": said({"entry": "payouts/job.py::run_daily"}),
    }
    _, cluster, nodes, links = run(membrane, graph, "add_implementation", {"space_id": "mod-payouts"}, answers)
    assert nodes == Counter({("space", "module"): 1, ("narrative", "implementation"): 1, ("thing", "dock"): 1,
                             ("moment", "module_definition"): 1, ("moment", "implementation"): 1,
                             ("moment", "docking"): 1})  # fmt: skip
    assert links == Counter({"contains": 2, "docks": 1, "expresses": 3, "about": 3})


# -------------------------------------------------------------------------------- record_work

HANDOFF = {
    "done": "Added val-cap and wired refunds/service.py::plan_refund to enforce it.",
    "state": "Property test passes on 500 generated charges; not run against staging data.",
    "traps": "make test skips the property tests; use make test-all.",
}


def test_record_work_progress_moment_goals_and_escalations(membrane, graph):
    assert "mod-refunds" in gap_nodes(graph, "space_without_progress")
    answers = {
        "handoff": said(HANDOFF),
        "next_goals": said(
            ["Run the cap check on a staging snapshot; done when every mismatch is explained.",
             "Add runtime coverage for val-cap; done when a health check verifies it."]
        ),
        "blockers": said(["Decision needed: may a disputed charge be refunded? Options: block or allow; decider: payments lead."]),
    }  # fmt: skip
    _, cluster, nodes, links = run(membrane, graph, "record_work", {"space_id": "mod-refunds"}, answers)
    assert nodes == Counter({("narrative", "goal"): 2, ("narrative", "escalation"): 1, ("moment", "progress"): 1,
                             ("moment", "planning"): 1, ("moment", "escalating"): 1})  # fmt: skip
    assert links == Counter({"contains": 3, "about": 4, "expresses": 3})
    (progress,) = moments_of(cluster, "progress")
    assert linked(graph, "about", progress["id"], "mod-refunds")
    assert "mod-refunds" not in gap_nodes(graph, "space_without_progress")
    assert len(gap_nodes(graph, "escalation_without_resolution")) == 2  # the new blocker is open


def test_record_work_with_nothing_next_is_just_the_moments(membrane, graph):
    answers = {"handoff": said({k: v for k, v in HANDOFF.items() if k != "traps"}), "next_goals": said([]), "blockers": said([])}
    _, cluster, nodes, links = run(membrane, graph, "record_work", {"space_id": "mod-empty"}, answers)
    assert nodes == Counter({("moment", "progress"): 1, ("moment", "planning"): 1, ("moment", "escalating"): 1})
    assert links == Counter({"about": 3, "expresses": 3})


# -------------------------------------------------------------------------------- investigate

FINDINGS = {
    "question": "Is the disputed-charge escalation still open in practice?",
    "evidence": "No resolves link into esc-disputes; refunds/service.py::plan_refund has no dispute check.",
    "conclusion": "Still open and still blocking partial refunds; confident.",
}


@pytest.mark.parametrize(
    ("follow_up", "extra", "expected_nodes", "expected_links"),
    [
        ("none", {}, {}, {}),
        ("goal", {"investigation_goal": said("Add a dispute check to plan_refund; done when the test for it passes.")},
         {("narrative", "goal"): 1, ("moment", "planning"): 1}, {"relates": 1, "contains": 1, "about": 1, "expresses": 1}),
        ("escalation", {"investigation_escalation": said("Decision needed: refund disputed charges or block them? Decider: payments lead.")},
         {("narrative", "escalation"): 1, ("moment", "escalating"): 1}, {"about": 2, "contains": 1, "expresses": 1}),
    ],
)  # fmt: skip
def test_investigate_moment_and_optional_follow_up(membrane, graph, follow_up, extra, expected_nodes, expected_links):
    answers = {"findings": said(FINDINGS), "follow_up": {"answer": follow_up, "reasoning": "see the evidence"}, **extra}
    _, cluster, nodes, links = run(membrane, graph, "investigate", {"target_id": "esc-disputes"}, answers)
    assert nodes == Counter({("moment", "investigation"): 1, ("moment", "decision"): 1}) + Counter(expected_nodes)
    assert links == Counter({"about": 2, "expresses": 2}) + Counter(expected_links)
    (moment,) = moments_of(cluster, "investigation")
    assert linked(graph, "about", moment["id"], "esc-disputes")


# ---------------------------------------------------------------------------- resolve_blocker

DECISION = {
    "decision": "Disputed charges are never refunded until the dispute closes.",
    "decided_by": "payments lead",
    "alternatives": "Refund at once: rejected, the bank may also return the money, paying twice.",
    "consequences": "Customers with a dispute wait for its outcome before any refund.",
}


def test_resolve_blocker_rationale_resolves_the_escalation(membrane, graph):
    assert gap_nodes(graph, "escalation_without_resolution") == {"esc-disputes"}
    answers = {"decision": said(DECISION), "sets_rule": {"answer": False, "reasoning": "the rule is procedural, not code"}}
    _, cluster, nodes, links = run(membrane, graph, "resolve_blocker", {"escalation_id": "esc-disputes"}, answers)
    assert nodes == Counter({("narrative", "rationale"): 1, ("moment", "resolution"): 1, ("moment", "decision"): 1})
    # the resolution moment is about the escalation and the rationale; the decision moment about the escalation
    assert links == Counter({"resolves": 1, "relates": 1, "contains": 1, "expresses": 2, "about": 3})
    assert linked(graph, "resolves", "rationale-esc-disputes", "esc-disputes")
    assert linked(graph, "relates", "rationale-esc-disputes", "mod-refunds")
    assert cluster["updates"] == [
        {"id": "esc-disputes", "fields": {"status": "resolved", "resolved_by": "rationale-esc-disputes"}}
    ]
    assert graph.get("esc-disputes")["status"] == "resolved"
    assert gap_nodes(graph, "escalation_without_resolution") == set()


def test_resolve_blocker_with_a_lasting_rule_calls_add_invariant(membrane, graph):
    answers = {
        "decision": said({**DECISION, "revisit_when": "The processor offers dispute-aware refunds."}),
        "sets_rule": {"answer": "yes", "reasoning": "the code must refuse these refunds"},
        "blocker_rule.guarded_behaviors": said(["beh-refund", "beh-partial"]),
        "blocker_rule.rule": said({**RULE, "name": "No refund while disputed",
                                   "statement": "For every charge with an open dispute, no refund is ever confirmed."}),
    }  # fmt: skip
    _, cluster, nodes, links = run(membrane, graph, "resolve_blocker", {"escalation_id": "esc-disputes"}, answers)
    assert nodes == Counter({("narrative", "rationale"): 1, ("narrative", "validation"): 1, ("moment", "resolution"): 1,
                             ("moment", "decision"): 1, ("moment", "selection"): 1, ("moment", "invariant"): 1})  # fmt: skip
    assert links == Counter({"resolves": 1, "relates": 2, "contains": 2, "ensures": 2, "expresses": 4, "about": 6})
    validation = "validation-mod-refunds-no-refund-while-disputed"
    assert linked(graph, "relates", "rationale-esc-disputes", validation)
    assert graph.get("rationale-esc-disputes")["revisit_when"] == "The processor offers dispute-aware refunds."
    assert gap_nodes(graph, "behavior_without_validation") == set()


# ------------------------------------------------------------------------------------- library


def test_every_gap_kind_has_a_skill_row_naming_a_shipped_protocol(membrane):
    from cabal.skills import load_skill

    for kind in GAP_KINDS.values():
        protocol = load_skill(kind.domain).select_protocol(kind.name)
        assert protocol is not None and membrane.library.exists(protocol), kind.name
