"""The upstream dialect: files written in it load (translated at load time) and run; malformed
ones are refused with their file and line. The fixtures in dialect/ were written for these tests."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from cabal.cli import main
from cabal.errors import ProtocolLoadError, ProtocolRuntimeError
from cabal.graph import schema
from cabal.membrane import Membrane, dialect, dialect_text
from cabal.membrane.library import ProtocolLibrary
from cabal.membrane.loader import load_protocol
from cabal.membrane.protocol import (
    AskStep,
    BranchStep,
    CompleteStep,
    EachStep,
    MoveFileStep,
    QueryStep,
    ReadFileStep,
    SetStep,
    UpdateStep,
)
from cabal.yaml_reader import read_yaml

HERE = Path(__file__).parent / "dialect"
ACTOR = {"id": "agent-1", "node_type": "actor", "type": "agent", "name": "operative"}


def links_from(graph, node_id):
    return sorted((l["type"], l["to"], l["properties"].get("nature")) for l in graph.links_from(node_id))


def problems_of(text: str, exists=()) -> list:
    with pytest.raises(ProtocolLoadError) as caught:
        load_protocol(textwrap.dedent(text), "u.yaml", protocol_exists=lambda name: name in exists)
    return caught.value.problems


# --------------------------------------------------------------------------- detection


def test_the_dialect_is_recognised_and_canonical_files_are_not():
    for path in HERE.glob("*.yaml"):
        assert dialect.is_upstream(read_yaml(path.read_text(), str(path))), path
    for path in (Path(__file__).parents[2] / "protocols").glob("*.yaml"):
        assert not dialect.is_upstream(read_yaml(path.read_text(), str(path))), path


def test_cabals_own_complete_step_does_not_mark_the_dialect():
    text = textwrap.dedent("""\
        protocol: stop_early
        steps:
          go_on:
            type: ask
            question: Go on?
            expects: {type: boolean}
          gate:
            type: branch
            condition: "{go_on}"
            then: $complete
            else: stop
          stop:
            type: complete
            summary: "stopped at the gate"
            outcome: cancelled
        """)  # fmt: skip
    assert not dialect.is_upstream(read_yaml(text, "stop_early.yaml"))
    stop = load_protocol(text, "stop_early.yaml").steps["stop"]
    assert (type(stop), stop.summary, stop.outcome) == (CompleteStep, "stopped at the gate", "cancelled")
    upstream = {"protocol": "u", "steps": {"end": {"type": "complete", "status": "cancelled", "message": "m"}}}
    assert dialect.is_upstream(upstream)


# -------------------------------------------------------------- the prerequisite pattern


@pytest.fixture
def core(graph):
    graph.create_cluster(
        [ACTOR,
         {"id": "space_TEAM_core", "node_type": "space", "type": "team", "name": "Core"},
         {"id": "task-a", "node_type": "narrative", "type": "task", "name": "Task A", "status": "open"},
         {"id": "task-b", "node_type": "narrative", "type": "task", "name": "Task B", "status": "open"}],
        [{"type": "contains", "from": "space_TEAM_core", "to": "task-a"},
         {"type": "contains", "from": "space_TEAM_core", "to": "task-b"}],
    )  # fmt: skip
    return Membrane(graph, protocol_dirs=[HERE])


CORE = {"actor_id": "agent-1", "space": "space_TEAM_core"}


def test_call_the_prerequisite_then_query_again(core, graph):
    started = core.start("plan_sprint", CORE)
    assert (started.protocol, started.step.id) == ("note_goal", "check_goals-call1.ask_goal")
    picking = core.continue_session(started.session_id, {"title": "Ship v2"})
    assert picking.step.id == "pick_goal"
    assert picking.step.answer_schema["properties"]["target_goal"]["enum"] == ["goal_ship-v2"]
    done = core.continue_session(picking.session_id, {"target_goal": "goal_ship-v2", "sprint_name": "Sprint 1"})
    assert (done.status, done.summary, done.created.to_wire()) == (
        "complete", "Sprint Sprint 1 serves goal_ship-v2", {"nodes": 2, "links": 3})  # fmt: skip
    # ``serves`` is not a link type of the schema: a relates link carrying it as its nature
    assert links_from(graph, "sprint_sprint-1") == [("relates", "goal_ship-v2", "serves")]


# ---------------------------------------------------------------------- record_meeting

DECIDED = [{"decision": "Ship Friday", "settled_task": "task-a"}, {"decision": "Freeze API", "settled_task": "task-b"}]


def test_record_meeting_reads_the_dialect_step_by_step(core, graph):
    first = core.start("record_meeting", CORE, session_id="s-m")
    step = first.step
    assert step.question == (
        "A meeting record keeps decisions findable.\nTeam CORE: 0 past decisions, 2 open tasks.\n"
        "Open tasks: - task-a: Task A\n- task-b: Task B\n"
    )
    schema_ = step.answer_schema
    assert schema_["required"] == ["topic", "decision_count"]  # required: false, and a default, make it optional
    assert schema_["properties"]["mood"] == {"type": "string", "enum": ["calm", "tense"], "description": "How did it go?",
                                             "default": "calm"}  # fmt: skip
    assert schema_["properties"]["topic"]["description"] == (
        "What was the meeting about?\n\nA few words\nWhy it matters: The topic names the record")
    assert step.moment == {"type": "answer", "agent_provides": []}  # its prose is the answer it names
    looping = core.continue_session("s-m", {"topic": "Release plan", "decision_count": 2})
    assert [item["question"] for item in looping.step.items] == ["Decision #1 of Release plan",
                                                                        "Decision #2 of Release plan"]  # fmt: skip
    assert looping.step.answer_schema["items"]["properties"]["settled_task"]["enum"] == ["task-a", "task-b"]
    handing = core.continue_session("s-m", DECIDED)
    assert (handing.protocol, handing.step.id) == ("note_goal", "hand_over.ask_goal")
    done = core.continue_session("s-m", {"title": "Ship v3"})
    assert (done.status, done.summary, done.created.to_wire()) == (
        "complete", "Meeting Release plan recorded: 2 decision(s)", {"nodes": 6, "links": 13})  # fmt: skip

    meeting = graph.get("meeting_release-plan")
    assert {k: meeting[k] for k in ("type", "name", "mood", "notes", "team")} == {
        "type": "meeting", "name": "Release plan", "mood": "calm", "notes": "none", "team": "CORE"}  # fmt: skip
    decision = graph.get("decision_release-plan_02")  # a node type the schema lacks: a narrative of that type
    assert {k: decision[k] for k in ("node_type", "type", "name", "content")} == {
        "node_type": "narrative", "type": "decision", "name": "decision_release-plan_02", "content": "Freeze API"}  # fmt: skip
    assert links_from(graph, "decision_release-plan_01") == [("relates", "task-a", "settles")]
    assert links_from(graph, "meeting_release-plan") == [
        ("contains", "decision_release-plan_01", None), ("contains", "decision_release-plan_02", None),
        ("relates", "space_TEAM_core", "summarises")]  # fmt: skip
    assert [graph.get(t)["status"] for t in ("task-a", "task-b")] == ["settled", "settled"]  # the "update" links
    assert graph.get("goal_ship-v3")["name"] == "Ship v3"
    described = graph.get("moment-s-m-describe")
    assert (described["prose"], links_from(graph, "moment-s-m-describe")) == ("Release plan", [
        ("about", "meeting_release-plan", None)])  # fmt: skip
    written = graph.get("moment-s-m-write_record")
    assert written["prose"] == "write_record created meeting_release-plan, decision_release-plan_01, decision_release-plan_02"


def test_a_complete_step_ends_with_its_message_and_keeps_what_was_said(core, graph):
    result = core.run("record_meeting", CORE, {"describe": {"topic": "Budget", "mood": "tense", "decision_count": 1}},
                      session_id="s-t")  # fmt: skip
    assert (result.status, result.summary) == ("complete", "A tense meeting with nothing noted: nothing recorded for Budget")
    assert result.created.to_wire() == {"nodes": 1, "links": 1}  # the describe step's moment and who said it
    assert graph.find("narrative", {"type": "meeting"}) == []


def test_the_documentation_is_kept_and_shown(capsys):
    protocol = ProtocolLibrary([HERE]).get("record_meeting")
    assert protocol.dialect == "upstream"
    assert protocol.docs["triggers"] == [{"event": "A meeting ended"}]
    assert protocol.docs["requires_skills"] == ["SKILL_Keep_Meeting_Records.md"]
    assert protocol.docs["config"] == {"record_moments": True}
    assert protocol.docs["output"] == {"returns": {"meeting": "meeting_{topic | slugify}"}}
    assert protocol.docs["steps"] == {"load_context": {"purpose": "Past decisions and open tasks, for context"}}
    assert main(["protocols", "show", "record_meeting", "--protocols", str(HERE)]) == 0
    shown = capsys.readouterr().out
    assert "dialect: upstream (translated into Cabal's format when loaded)\n" in shown
    assert "  escalate: branch on checks ('{notes} is empty': escalate-end1, 'true': decisions)\n" in shown
    assert "documentation:\n  triggers:\n  - event: A meeting ended\n" in shown


def test_what_each_construct_becomes():
    steps = ProtocolLibrary([HERE]).get("record_meeting").steps
    assert [s for s in steps] == ["load_context", "load_context-fetch2", "load_context-computed", "describe",
                                  "route_mood", "escalate-end1", "escalate", "decisions", "write_record",
                                  "write_record-update1", "hand_over"]  # fmt: skip
    fetch = steps["load_context-fetch2"]
    assert isinstance(fetch, QueryStep) and dict(fetch.query.args) == {
        "node_type": "narrative", "where": {"type": "task", "status": "open"}, "in_space": "{space}"}  # fmt: skip
    assert isinstance(steps["load_context-computed"], SetStep)
    assert dict(steps["load_context-computed"].values) == {
        "team": "{space|strip_prefix:'space_TEAM_'|upper}"}  # fmt: skip
    describe = steps["describe"]
    assert isinstance(describe, AskStep) and describe.flatten and describe.moment.prose == "{topic}"
    route = steps["route_mood"]
    assert isinstance(route, BranchStep) and route.condition == "{mood}" and dict(route.cases) == {
        "calm": "decisions", "tense": "escalate"}  # fmt: skip
    assert steps["escalate"].checks == (("{notes} is empty", "escalate-end1"), ("true", "decisions"))
    assert isinstance(steps["escalate-end1"], CompleteStep) and steps["escalate-end1"].outcome == "cancelled"
    loop = steps["decisions"]
    assert (loop.for_each, loop.store_as, loop.flatten) == ("{decision_count|range}", "decided", False)
    update = steps["write_record-update1"]
    assert isinstance(update, UpdateStep) and (update.for_each, update.node) == ("{decided}", "{item.settled_task}")


# ------------------------------------------------------------------------ close_ticket


@pytest.fixture
def tickets(graph):
    graph.create_cluster(
        [ACTOR,
         {"id": "agent-2", "node_type": "actor", "type": "agent", "name": "reviewer"},
         {"id": "mod-auth", "node_type": "space", "type": "module", "name": "Auth"},
         {"id": "mod-db", "node_type": "space", "type": "module", "name": "DB"},
         {"id": "t-1", "node_type": "narrative", "type": "ticket", "name": "Fix login", "status": "open", "priority": 2,
          "area": "auth"},
         {"id": "t-2", "node_type": "narrative", "type": "ticket", "name": "Index users", "status": "open", "priority": 1,
          "area": "db"},
         {"id": "m-old", "node_type": "moment", "type": "comment", "status": "spoken", "said_at": "2026-01-01"},
         {"id": "m-new", "node_type": "moment", "type": "comment", "status": "spoken", "said_at": "2026-02-01"}],
        [{"type": "references", "from": "t-1", "to": "mod-auth"}, {"type": "references", "from": "t-1", "to": "mod-db"},
         {"type": "about", "from": "m-old", "to": "t-1"}, {"type": "about", "from": "m-new", "to": "t-1"}],
    )  # fmt: skip
    return graph


PICK = {"pick": {"answer": {"ticket_id": "t-1", "reviewer": "agent-2"}, "description": "all modules patched"}}


def test_close_ticket_gets_transforms_loops_and_checks_its_own_writes(tickets):
    membrane = Membrane(tickets, protocol_dirs=[HERE])
    result = membrane.run("close_ticket", {"actor_id": "agent-1"}, PICK, session_id="s-c")
    assert (result.status, result.summary, result.created.to_wire()) == (
        "complete", "Fix login closed (1 schema entry read)", {"nodes": 4, "links": 6})  # fmt: skip
    ticket = tickets.get("t-1")
    assert (ticket["status"], ticket["closed_by"]) == ("closed", "agent-1")  # ``updates:`` on the create
    notes = tickets.find("narrative", {"type": "change_note"})  # one per module, from the foreach body
    assert [(n["id"], n["name"]) for n in notes] == [("note_t-1_mod-auth", "Fix login touched mod-auth"),
                                                     ("note_t-1_mod-db", "Fix login touched mod-db")]  # fmt: skip
    closure = tickets.get("closure_t-1")
    # {queue|first|id}: the open tickets by priority; {last_word}: the newest moment about the ticket
    assert (closure["prose"], closure["status"]) == ("Closed Fix login; next up: t-2; last word: m-new", "spoken")
    assert links_from(tickets, "closure_t-1") == [("about", "t-1", None), ("relates", "agent-2", "reviewed_by")]
    assert tickets.get("moment-s-c-pick")["prose"] == "all modules patched"


def test_a_failed_expectation_stops_with_its_error_and_writes_nothing(tickets):
    text = (HERE / "close_ticket.yaml").read_text().replace('            id: "note_{ticket_id}_{module}"',
                                                           '            id: "elsewhere_{module}"')  # fmt: skip
    membrane = Membrane(tickets, protocol_dirs=[HERE])
    membrane.load_string(text)
    with pytest.raises(ProtocolRuntimeError) as failed:
        membrane.run("close_ticket", {"actor_id": "agent-1"}, PICK)
    assert str(failed.value) == "the note on mod-auth is missing"
    assert tickets.get("t-1")["status"] == "open" and tickets.find("narrative", {"type": "change_note"}) == []


def test_close_ticket_steps():
    steps = ProtocolLibrary([HERE]).get("close_ticket").steps
    assert dict(steps["load"].query.args) == {"id": "{ticket_id}", "links": True}
    assert dict(steps["load-fetch2"].query.args) == {
        "node_type": "moment", "about": "{ticket_id}", "order_by": "-said_at", "limit": 1}  # fmt: skip
    assert dict(steps["rank"].values) == {"queue": "{open_tickets|sort:priority|group:area}"}
    assert dict(steps["describe_schema"].query.args) == {"name": "narrative"}
    each = steps["note_modules"]
    assert isinstance(each, EachStep) and (each.items, each.as_name, each.body) == (
        "{ticket.links.references}", "module", "note_modules-file_note")  # fmt: skip
    assert steps["note_modules-check_note-expect"].checks is None
    assert steps["note_modules-check_note-expect"].condition == "len({check_note}) > 0"
    assert steps["note_modules-check_note-failed"].outcome == "failed"
    assert steps["pick"].questions[1].expects.type == "id"  # reference_or_string: its answer is a link end


# --------------------------------------------------------------------- templates, filters


@pytest.mark.parametrize(
    ("written", "read"),
    [
        ("{name | slugify | truncate(30)}", "{name|slugify|truncate:30}"),
        ("{loop_index | pad2}", "{position|pad:2}"),
        ("{doc.path | hash6}", "{doc.path|hash:6}"),
        ("{space | strip_prefix('space_MODULE_')}", "{space|strip_prefix:'space_MODULE_'}"),
        ('{risks | default("None identified")}', '{risks|default:"None identified"}'),
        ("{status_change | default(initial_status)}", "{status_change|default:initial_status}"),
        ("{nodes | map(id)}", "{nodes|map:id}"),
        ("{items | filter(type=goal) | count}", "{items|where:type=goal|count}"),
        ("{last | first | id}", "{last|first|field:id}"),
        ("{options | to_json}", "{options|json}"),
        ('{files | join(", ")}', '{files|join:", "}'),
        ("{timestamp_short}", "{timestamp|truncate:19|compact}"),
        ("{module | clean_module_name}", "{module|slugify}"),
        ("{body | extract_title}", "{body|title}"),
        ("{a | count_words + b | count_words}", "{a|words} + {b|words}"),
        ("{ticket.about | first}", "{ticket.links.about|first}"),
        ("{contextual_knowledge.rule}", "Ids look like {{kind}}_{{name}}"),
        ("{node-type}_{SUBTYPE}", "{{node-type}}_{SUBTYPE}"),
    ],
)
def test_dialect_templates_become_canonical_ones(written, read):
    problems = []
    reader = dialect_text.TextReader({"rule": "Ids look like {kind}_{name}"}, {"ticket"}, lambda *a, **k: problems.append(a))
    assert reader.text(written, "s", "f", None) == read
    assert problems == []


@pytest.mark.parametrize(
    ("written", "read"),
    [
        ("{behaviors | list names with ids}", "{behaviors|lines}"),
        ("{validations | format_with_coverage_status}", "{validations|lines}"),
        ("{alternatives | format_numbered}", "{alternatives|numbered}"),
        ("{items | list names}", "{items|names}"),
        ('{x | if_present: "- see {x}"}', '{{x | if_present: "- see {{x}}"}}'),  # means nothing here: shown as written
    ],
)
def test_display_filters(written, read):
    problems = []
    reader = dialect_text.TextReader({}, set(), lambda *a, **k: problems.append(a))
    assert reader.text(written, "s", "f", None, display=True) == read
    assert problems == []


def test_an_unknown_filter_where_a_value_is_computed_is_located():
    found = problems_of("""\
        protocol: u
        triggers: []
        steps:
          a:
            type: ask
            context: "Shown as {x | sparkle}"
            questions: [{name: x, ask: "X?", expects: {type: string}}]
            next: b
          b:
            type: create
            nodes: [{id: "n-{x | sparkle}", node_type: narrative, type: note, name: n}]
            links: [{type: relates, from: "n", to: "{x}"}]
        """)
    assert [(p.step, p.field, p.line, p.message) for p in found] == [
        ("b", "nodes.0.id", 11, "unknown filter 'sparkle' in {x | sparkle}")]  # fmt: skip


@pytest.mark.parametrize(
    ("written", "read"),
    [
        ("ready", "true"),
        ("{existing | contains name: '{wanted}'}", "{wanted} in {existing|map:name}"),
        ("{docs | has_all_doc_types}", " and ".join(f"'{t}' in {{docs|map:type}}" for t in dialect_text.DOC_CHAIN_TYPES)),
        ("{outcome_type} == 'needs_decision'", "{outcome_type} == 'needs_decision'"),
        ("len({objectives}) == 0", "len({objectives}) == 0"),
    ],
)
def test_dialect_conditions(written, read):
    assert dialect_text.TextReader({}, set(), print).condition(written, "s", "f", None) == read


# ------------------------------------------------------------------- nodes, links, moments


def test_nodes_and_links_fit_the_schema():
    translator = dialect._Translator({}, "u.yaml")
    node = translator.node({"id": "m-{x}", "node_type": "moment", "prose": "p"}, "s", "nodes.0", {})
    assert dict(node) == {"id": "m-{x}", "node_type": "moment", "prose": "p", "type": "moment", "status": "spoken"}
    node = translator.node({"id": "t-{x}", "node_type": "todo", "content": "c"}, "s", "nodes.1", {})
    assert dict(node) == {"node_type": "narrative", "type": "todo", "id": "t-{x}", "content": "c", "name": "t-{x}"}
    link = translator.link({"type": "{item.kind}", "from": "a", "to": "b"}, "s", "links.0", {})
    assert dict(link) == {"from": "a", "to": "b", "type": "relates", "properties": {"nature": "{item.kind}"}}
    link = translator.link({"type": "contains", "nature": "owns", "from": "a", "to": "b"}, "s", "links.1", {})
    assert dict(link) == {"from": "a", "to": "b", "type": "contains", "properties": {"nature": "owns"}}
    assert "attached_to" not in schema.LINK_TYPES  # why such links become relates


def test_agent_provides_in_its_three_forms():
    translator = dialect._Translator({}, "u.yaml")
    assert dict(translator.moment({"agent_provides": ["description", "reasoning"]}, "s", {})) == {
        "agent_provides": ["description", "reasoning"]}  # fmt: skip
    assert dict(translator.moment({"agent_provides": [{"description": "what"}, {"reasoning": "why"}]}, "s", {})) == {
        "agent_provides": ["description", "reasoning"]}  # fmt: skip
    assert dict(translator.moment({"agent_provides": ["statement", "failure_mode"]}, "s", {})) == {
        "agent_provides": [], "prose": "{statement}\n\n{failure_mode}"}  # fmt: skip


# ---------------------------------------------------------------------- malformed files


def test_a_target_that_is_not_a_step_is_located_where_the_author_wrote_it():
    found = problems_of("""\
        protocol: u
        triggers: [{event: x}]
        steps:
          load:
            type: query
            auto_fetch:
              - query: {find: narrative, type: goal}
                store_as: goals
            next: check
          check:
            type: branch
            checks:
              - condition: "{goals | count} == 0"
                action:
                  type: call_protocol
                  protocol: other
                  on_complete: reload
              - condition: ready
                action: {goto: $complete}
        """, exists=("other",))
    assert [(p.step, p.field, p.line, p.message) for p in found] == [
        ("check", "checks.0.action.on_complete", 17, "on_complete points to 'reload', which is not a step of this protocol"),
    ]


def test_keys_given_twice_and_invalid_yaml_are_located():
    found = problems_of("""\
        procedure: u
        triggers: []
        steps:
          a:
            type: ask
            context: "First"
            context: "Second"
            questions: [{name: x, ask: "X?", expects: {type: string}}]
        """)
    assert [(p.step, p.field, p.line, p.message) for p in found] == [
        ("a", "context", 7, "'context' is given twice; the second would silently win")]  # fmt: skip
    found = problems_of("procedure: u\ntriggers: []\nsteps:\n  a: {type: ask, context: [unclosed\n")
    assert len(found) == 1 and found[0].line == 5 and found[0].message.startswith("invalid YAML")


def test_an_unknown_key_of_a_dialect_step_is_located():
    found = problems_of("""\
        protocol: u
        triggers: []
        steps:
          a:
            type: ask
            context: "X"
            questions: [{name: x, ask: "X?", expects: {type: string}}]
            colour: blue
        """)
    assert [(p.step, p.field, p.line, p.message) for p in found] == [
        ("a", "colour", 8, "upstream ask steps do not take 'colour'")]  # fmt: skip


INBOX = {"a": "# Alpha\n\nthe first note\n", "b": "Beta, without a heading\nsecond line\n"}


def test_the_dialects_file_steps_load_and_run(graph, tmp_path):
    steps = ProtocolLibrary([HERE]).get("file_inbox").steps
    load, shelve = steps["each_item-load"], steps["each_item-shelve"]
    assert (type(load), load.path, load.store_as, load.next) == (ReadFileStep, "{entry.path}", "body", "each_item-write")
    assert (type(shelve), shelve.source, shelve.target, shelve.next) == (
        MoveFileStep, "{entry.path}", "shelved/{entry.path|basename}", "each_item")  # fmt: skip
    (tmp_path / "inbox").mkdir()
    for name, text in INBOX.items():
        (tmp_path / "inbox" / f"{name}.md").write_text(text, encoding="utf-8")
    graph.create_cluster(
        [ACTOR, {"id": "space_inbox", "node_type": "space", "type": "team", "name": "Inbox"},
         *({"id": f"item-{name}", "node_type": "narrative", "type": "inbox_item", "name": name, "status": "waiting",
            "path": f"inbox/{name}.md"} for name in ("b", "a"))],
        [{"type": "contains", "from": "space_inbox", "to": f"item-{name}"} for name in ("b", "a")],
    )  # fmt: skip
    done = Membrane(graph, protocol_dirs=[HERE], file_root=tmp_path).run(
        "file_inbox", {"actor_id": "agent-1", "space": "space_inbox"}, {})
    assert (done.status, done.summary) == ("complete", "Filed 2 inbox file(s)")
    assert done.created.to_wire() == {"nodes": 2, "links": 2, "moved": [
        {"step": "each_item-shelve", "from": "inbox/a.md", "to": "shelved/a.md"},
        {"step": "each_item-shelve", "from": "inbox/b.md", "to": "shelved/b.md"}]}  # fmt: skip
    for node_id, name, title in (("narrative_INBOX_909d0d", "a", "Alpha"),
                                 ("narrative_INBOX_149ae0", "b", "Beta, without a heading")):  # fmt: skip
        node = graph.get(node_id)
        assert (node["type"], node["title"], node["content"]) == ("inbox_note", title, INBOX[name])
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.md")) == ["shelved/a.md", "shelved/b.md"]


def test_malformed_file_steps_of_the_dialect_are_located():
    found = problems_of("""\
        protocol: u
        triggers: []
        steps:
          each_doc:
            type: foreach
            items: docs
            as: doc
            steps:
              - read_it:
                  type: read_file
                  store_as: text
              - put_away:
                  type: move_file
                  from: "{doc}"
                  to: "../{doc | basename}"
                  overwrite: true
        """)
    assert [(p.step, p.field, p.line, p.message) for p in found] == [
        ("each_doc", "steps.1.put_away.overwrite", 16, "upstream move_file steps do not take 'overwrite'"),
        ("each_doc", "steps.0.read_it.path", 10,
         "a read_file step needs 'path': a path under the membrane's file root, got None"),
        ("each_doc", "steps.1.put_away.to", 15,
         "'../{doc|basename}' climbs out with '..'; a path stays under the membrane's file root"),
    ]  # fmt: skip
