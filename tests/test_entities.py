import json

import pytest
from pydantic import TypeAdapter, ValidationError

from cabal.entities import (
    ALLOWED_ENVELOPES,
    FINAL_OUTPUT,
    HALT,
    MAX_CONTEXT_ITERATIONS,
    MAX_CONTEXT_REQUESTS,
    REQUEST_CONTEXT,
    STEP_OUTPUTS,
    Acceptance,
    AddProduct,
    Assignment,
    BootstrapOutput,
    CloseOutput,
    Collab,
    ContextRequest,
    Directive,
    FeedbackResponse,
    Finding,
    Halt,
    HaltEnvelope,
    InitialProduct,
    InspectOutput,
    Inspection,
    Message,
    MoveProduct,
    NewVersion,
    PeerReviewOutput,
    PlanOutput,
    PresentationOutput,
    Product,
    ProductDraft,
    ProductType,
    ReflectOutput,
    Remark,
    RemoveProduct,
    RequestContextEnvelope,
    TreeOperation,
    UpdateProduct,
    Version,
    WriteOutput,
    count_sentences,
    envelope_models,
)

TREE_OPERATION = TypeAdapter(TreeOperation)


def collab(**changes):
    data = {
        "refersToProduct": "p1",
        "type": "feedback",
        "importance": 5,
        "comment": "The schema lacks an index on email.",
        "shortestSummary": "Missing email index",
    }
    data.update(changes)
    return Collab.model_validate(data)


def finding(severity):
    return {
        "category": "quality",
        "severity": severity,
        "issue": "issue",
        "recommendation": "fix it",
    }


def inspection(assessment, *severities):
    return Inspection.model_validate(
        {
            "productId": "p1",
            "versionId": "v1",
            "assessment": assessment,
            "findings": [finding(severity) for severity in severities],
        }
    )


# ---------------------------------------------------------------------------------- limits


@pytest.mark.parametrize(("importance", "ok"), [(0, False), (1, True), (10, True), (11, False)])
def test_collab_importance_bounds(importance, ok):
    if ok:
        assert collab(importance=importance).importance == importance
    else:
        with pytest.raises(ValidationError):
            collab(importance=importance)


@pytest.mark.parametrize(("importance", "ok"), [(0, False), (1, True), (10, True), (11, False)])
def test_directive_importance_bounds(importance, ok):
    data = {"objective": "o", "dod": "d", "why": "w", "importance": importance}
    if ok:
        assert Directive.model_validate(data).importance == importance
    else:
        with pytest.raises(ValidationError):
            Directive.model_validate(data)


@pytest.mark.parametrize(("severity", "ok"), [(0, False), (1, True), (10, True), (11, False)])
def test_finding_severity_bounds(severity, ok):
    if ok:
        assert Finding.model_validate(finding(severity)).severity == severity
    else:
        with pytest.raises(ValidationError):
            Finding.model_validate(finding(severity))


def _remark(content):
    return Remark.model_validate({"recipients": ["chair-1"], "type": "note", "content": content})


def _halt(message):
    return Halt.model_validate({"type": "question", "to": ["u:all"], "message": message})


def _context_request(reason):
    return ContextRequest.model_validate(
        {"productId": "p1", "need": "full_content", "reason": reason}
    )


def _draft(name="Schema", dod="Tables defined"):
    return ProductDraft.model_validate({"name": name, "type": "Content", "dod": dod})


def _new_version(title="Title", content="x" * 50):
    return NewVersion.model_validate(
        {"contentTitle": title, "content": content, "changeSummary": "first"}
    )


def _bootstrap_mission(mission):
    return BootstrapOutput.model_validate({**BOOTSTRAP, "mission": mission})


LENGTH_LIMITS = [
    ("collab comment", lambda text: collab(comment=text), 5000),
    ("collab shortestSummary", lambda text: collab(shortestSummary=text), 120),
    ("remark content", _remark, 2000),
    ("halt message", _halt, 2000),
    ("context request reason", _context_request, 500),
    ("product name", lambda text: _draft(name=text), 200),
    ("product dod", lambda text: _draft(dod=text), 1000),
    ("version contentTitle", lambda text: _new_version(title=text), 200),
    ("bootstrap mission", _bootstrap_mission, 2000),
]


@pytest.mark.parametrize(
    ("label", "build", "limit"), LENGTH_LIMITS, ids=[row[0] for row in LENGTH_LIMITS]
)
def test_max_length_accepts_at_limit_and_rejects_one_over(label, build, limit):
    build("a" * limit)
    with pytest.raises(ValidationError) as error:
        build("a" * (limit + 1))
    assert error.value.errors()[0]["type"] == "string_too_long"


def test_new_version_content_needs_50_chars():
    assert _new_version(content="x" * 50).content == "x" * 50
    with pytest.raises(ValidationError) as error:
        _new_version(content="x" * 49)
    assert error.value.errors()[0]["loc"] == ("content",)
    assert error.value.errors()[0]["type"] == "string_too_short"


def test_stored_version_has_no_50_char_floor_but_numbers_from_one():
    data = {
        "id": "v1",
        "productId": "p1",
        "author": "chair-1",
        "content": "Short.",
        "changeSummary": "c",
        "number": 1,
    }
    assert Version.model_validate(data).number == 1
    with pytest.raises(ValidationError):
        Version.model_validate({**data, "number": 0})


@pytest.mark.parametrize(("count", "ok"), [(0, False), (1, True), (5, True), (6, False)])
def test_request_context_takes_one_to_five_requests(count, ok):
    requests = [{"productId": f"p{i}", "need": "all_feedback", "reason": "r"} for i in range(count)]
    data = {"requests": requests}
    if ok:
        assert len(RequestContextEnvelope.model_validate(data).requests) == count
    else:
        with pytest.raises(ValidationError):
            RequestContextEnvelope.model_validate(data)


def test_context_limits():
    assert (MAX_CONTEXT_REQUESTS, MAX_CONTEXT_ITERATIONS) == (5, 3)


def test_context_request_need_is_an_enum():
    with pytest.raises(ValidationError):
        ContextRequest.model_validate({"productId": "p1", "need": "everything", "reason": "r"})


# ---------------------------------------------------------------------------------- messages


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("", 0),
        ("One sentence.", 1),
        ("One sentence without a stop", 1),
        ("First. Second.", 2),
        ("First! Second? Third.", 3),
        ("Use a cache, e.g. Redis, for sessions.", 1),
        ("Pick one, i.e. the cheaper, and move on.", 1),
        ("Three documents delivered, incl. the one-page sheet. Fill in two blanks.", 2),  # an Envoy was refused for 3
        ("Latency fell to 3.5 ms in v1.2 of the API.", 1),
        ("We shipped it to the U.S. team today.", 1),
        ("Wait... it works now.", 2),
        ('He said "done." Then left.', 2),
        ("Done (mostly.) Next up.", 2),
        ("See [[p:p1.2]] for details. Then [[v:3]].", 2),
    ],
)
def test_count_sentences(text, count):
    assert count_sentences(text) == count


def _message(content, as_agent="chair-1"):
    return Message.model_validate({"content": content, "asAgent": as_agent})


def test_message_allows_one_or_two_sentences():
    assert _message("We chose Postgres. It fits the load, e.g. 3.5k writes/s.").content == (
        "We chose Postgres. It fits the load, e.g. 3.5k writes/s."
    )
    with pytest.raises(ValidationError) as error:
        _message("One. Two. Three.")
    assert "this one has 3" in str(error.value)


@pytest.mark.parametrize("content", ["", "   "])
def test_message_must_say_something(content):
    with pytest.raises(ValidationError):
        _message(content)


def test_message_length_bound():
    assert len(_message("a" * 600).content) == 600
    with pytest.raises(ValidationError):
        _message("a" * 601)


@pytest.mark.parametrize(
    ("speaker", "ok"),
    [
        ("chair-1", True),
        ("operative-1", True),
        ("operative-12", True),
        ("watchdog-1", False),
        ("envoy-1", False),
        ("chair-2", False),
        ("operative-", False),
    ],
)
def test_message_speaker_rules(speaker, ok):
    if ok:
        assert _message("Hello.", speaker).as_agent == speaker
    else:
        with pytest.raises(ValidationError):
            _message("Hello.", speaker)


@pytest.mark.parametrize(("count", "ok"), [(0, False), (1, True), (10, True), (11, False)])
def test_presentation_takes_one_to_ten_messages(count, ok):
    data = {"reasoning": "r", "messages": [{"content": f"Message {i}.", "asAgent": "chair-1"} for i in range(count)]}
    if ok:
        assert len(PresentationOutput.model_validate(data).messages) == count
    else:
        with pytest.raises(ValidationError):
            PresentationOutput.model_validate(data)


# ---------------------------------------------------------------------------------- tree ops

ADD = {
    "action": "ADD",
    "newId": "new-1",
    "parentId": "p1",
    "product": {"name": "API", "type": "Collection", "dod": "All endpoints specified"},
}


@pytest.mark.parametrize(
    ("data", "expected_type"),
    [
        (ADD, AddProduct),
        ({"action": "REMOVE", "productId": "p2", "reason": "obsolete"}, RemoveProduct),
        ({"action": "MOVE", "productId": "p2", "parentId": "new-1"}, MoveProduct),
        ({"action": "UPDATE", "productId": "p2", "product": {"dod": "Stricter"}}, UpdateProduct),
    ],
)
def test_tree_operation_dispatches_on_action(data, expected_type):
    operation = TREE_OPERATION.validate_python(data)
    assert type(operation) is expected_type
    assert operation.action == data["action"]


def test_tree_operation_fields_are_snake_case_in_python():
    operation = TREE_OPERATION.validate_python(ADD)
    assert operation.new_id == "new-1"
    assert operation.parent_id == "p1"
    assert operation.product.type is ProductType.COLLECTION
    assert operation.product.description is None
    assert operation.product.assignee is None


def test_add_without_new_id_is_rejected():
    data = {key: value for key, value in ADD.items() if key != "newId"}
    with pytest.raises(ValidationError) as error:
        TREE_OPERATION.validate_python(data)
    assert [(e["type"], e["loc"]) for e in error.value.errors()] == [("missing", ("ADD", "newId"))]


def test_unknown_action_is_rejected():
    with pytest.raises(ValidationError) as error:
        TREE_OPERATION.validate_python({"action": "RENAME", "productId": "p1"})
    assert error.value.errors()[0]["type"] == "union_tag_invalid"


@pytest.mark.parametrize(
    ("new_id", "ok"),
    [
        ("new-1", True),
        ("new-42", True),
        ("new-", False),
        ("new-x", False),
        ("new-1a", False),
        ("NEW-1", False),
        ("p1", False),
        (" new-1", False),
    ],
)
def test_new_id_pattern(new_id, ok):
    data = {**ADD, "newId": new_id}
    if ok:
        assert TREE_OPERATION.validate_python(data).new_id == new_id
    else:
        with pytest.raises(ValidationError):
            TREE_OPERATION.validate_python(data)


def test_update_needs_at_least_one_field():
    with pytest.raises(ValidationError) as error:
        TREE_OPERATION.validate_python({"action": "UPDATE", "productId": "p2", "product": {}})
    assert "at least one of" in str(error.value)
    operation = TREE_OPERATION.validate_python(
        {"action": "UPDATE", "productId": "p2", "product": {"assignee": "operative-2"}}
    )
    assert operation.product.assignee == "operative-2"


def test_product_type_is_an_enum_of_four():
    assert [member.value for member in ProductType] == [
        "Content",
        "Decision",
        "Collection",
        "Orchestration",
    ]
    with pytest.raises(ValidationError):
        ProductDraft.model_validate({"name": "x", "type": "Folder", "dod": "d"})


@pytest.mark.parametrize(
    ("parent", "child", "ok"),
    [
        ("Content", "Content", False),
        ("Collection", "Content", True),
        ("Collection", "Decision", False),
        ("Decision", "Orchestration", True),
        ("Orchestration", "Collection", True),
    ],
)
def test_product_type_containment(parent, child, ok):
    assert ProductType(parent).can_contain(ProductType(child)) is ok


# ---------------------------------------------------------------------------------- naming


def test_camel_case_in_and_out():
    value = collab(refersToVersion="v2", respondingToCollabIds=["c1"])
    assert value.refers_to_product == "p1"
    assert value.shortest_summary == "Missing email index"
    assert value.model_dump(by_alias=True) == {
        "refersToProduct": "p1",
        "type": "feedback",
        "importance": 5,
        "comment": "The schema lacks an index on email.",
        "shortestSummary": "Missing email index",
        "refersToVersion": "v2",
        "referencesProductIds": [],
        "addresseeIds": [],
        "respondingToCollabIds": ["c1"],
    }


def test_snake_case_names_are_accepted_in_python():
    product = Product(id="p1", name="Root", type="Orchestration", parent_id=None, dod="Ship it")
    assert product.model_dump(by_alias=True) == {
        "id": "p1",
        "name": "Root",
        "type": ProductType.ORCHESTRATION,
        "parentId": None,
        "owner": None,
        "dod": "Ship it",
        "description": None,
        "status": "open",
    }


def test_remark_defaults_and_alias():
    remark = _remark("Please prioritise the API.")
    assert remark.is_blocker is False
    assert remark.model_dump(by_alias=True)["isBlocker"] is False


@pytest.mark.parametrize(
    ("model", "data"),
    [
        (
            Collab,
            {
                "refersToProduct": "p1",
                "type": "feedback",
                "importance": 5,
                "comment": "c",
                "shortestSummary": "s",
                "author": "operative-1",
            },
        ),
        (Acceptance, {"productId": "p1", "accepted": True, "note": "x"}),
        (Halt, {"type": "done", "to": ["u:all"], "message": "Finished.", "extra": 1}),
        (
            Assignment,
            {
                "productId": "p1",
                "assignee": "operative-1",
                "directive": {
                    "objective": "o",
                    "dod": "d",
                    "why": "w",
                    "importance": 5,
                    "deadline": "now",
                },
            },
        ),
    ],
)
def test_extra_keys_are_forbidden(model, data):
    with pytest.raises(ValidationError) as error:
        model.model_validate(data)
    assert [e["type"] for e in error.value.errors()] == ["extra_forbidden"]


def test_models_are_frozen():
    value = collab()
    with pytest.raises(ValidationError):
        value.importance = 9


def test_collab_blocks_acceptance_from_importance_8():
    assert collab(importance=7).is_blocking is False
    assert collab(importance=8).is_blocking is True


def test_collab_type_is_an_enum():
    with pytest.raises(ValidationError):
        collab(type="user_independent")


# ---------------------------------------------------------------------------------- verdict

VERDICTS = [
    # assessment, severities, expected verdict, problem count
    ("approved", (), "approved", 0),
    ("approved", (1, 4), "approved", 0),
    ("needs_revision", (4,), "approved", 0),
    ("blocked", (4,), "approved", 1),
    ("blocked", (), "approved", 1),
    ("approved", (5,), "needs_revision", 1),
    ("approved", (2, 7), "needs_revision", 1),
    ("needs_revision", (5, 7), "needs_revision", 0),
    ("blocked", (7,), "needs_revision", 1),
    ("approved", (8,), "blocked", 1),
    ("needs_revision", (3, 10), "blocked", 1),
    ("blocked", (8, 2), "blocked", 0),
]


@pytest.mark.parametrize(("assessment", "severities", "expected", "problems"), VERDICTS)
def test_verdict_follows_findings(assessment, severities, expected, problems):
    value = inspection(assessment, *severities)
    assert value.expected_assessment() == expected
    assert len(value.verdict_problems()) == problems


def test_verdict_problem_messages():
    assert inspection("approved", 3, 6).verdict_problems() == [
        "assessment 'approved' is too lenient: a finding has severity 6 (5-7), "
        "which allows at most 'needs_revision'"
    ]
    assert inspection("needs_revision", 9).verdict_problems() == [
        "assessment 'needs_revision' is too lenient: a finding has severity 9 (>= 8), "
        "which requires 'blocked'"
    ]
    assert inspection("blocked", 7).verdict_problems() == [
        "assessment 'blocked' needs a finding of severity >= 8; the highest is 7"
    ]
    assert inspection("blocked").verdict_problems() == [
        "assessment 'blocked' needs a finding of severity >= 8; the highest is none (no findings)"
    ]


# ---------------------------------------------------------------------------------- step outputs

BOOTSTRAP = {
    "thinking": {"interpretation": "A todo API.", "scopeDecisions": "No UI."},
    "mission": "Build a todo API.",
    "objectives": ["Specify the API"],
    "constraints": ["REST only"],
    "personas": {"operative-1": "Backend engineer"},
    "operativeDomains": {"operative-1": {"responsibility": "API design", "area": "backend"}},
    "initialProducts": [
        {"name": "API spec", "type": "Content", "dod": "Endpoints listed", "owner": "operative-1"}
    ],
}

PLAN = {
    "thinking": {"roundStrategy": "Specify first.", "acceptanceRationale": "Nothing ready."},
    "treeOperations": [ADD, {"action": "REMOVE", "productId": "p3", "reason": "duplicate"}],
    "assignments": [
        {
            "productId": "new-1",
            "assignee": "operative-1",
            "directive": {
                "objective": "List endpoints",
                "dod": "All CRUD",
                "why": "Core",
                "importance": 8,
            },
            "attachedContext": [
                {"productId": "p2", "include": ["content", "feedback"], "reason": "Schema"}
            ],
        }
    ],
    "acceptance": [{"productId": "p2", "accepted": False, "rejectionReason": "Open blocker"}],
    "remarks": [{"recipients": ["operative-1"], "type": "note", "content": "Start with auth."}],
    "bootstrapOverrides": {"constraints": ["REST only", "No auth yet"]},
}

STEP_EXAMPLES = {
    "bootstrap": BOOTSTRAP,
    "reflect": {
        "reasoning": "The index is missing; the collab is right.",
        "reflections": [
            {
                "refersToProduct": "p1",
                "dodStatus": "partially_met",
                "feedbackResponses": [
                    {
                        "collabId": "c1",
                        "action": "accept",
                        "rationale": "Valid",
                        "plannedChange": "Add index",
                    }
                ],
                "nextVersionDelta": "Add the index.",
            }
        ]
    },
    "plan": PLAN,
    "write": {
        "reasoning": "The index answers the collab.",
        "versions": [
            {
                "productId": "p1",
                "newVersion": {"contentTitle": "v2", "content": "x" * 60, "changeSummary": "Index"},
            }
        ]
    },
    "peer_review": {
        "reasoning": "It does what its DoD asks.",
        "reviews": [
            {"productId": "p1", "versionId": "v2", "assessment": "approved", "summary": "Good."}
        ]
    },
    "inspect": {
        "reasoning": "One finding of severity 6: at most needs_revision.",
        "inspections": [
            {
                "productId": "p1",
                "versionId": "v2",
                "assessment": "needs_revision",
                "findings": [finding(6)],
            }
        ]
    },
    "close": {
        "reasoning": "v2 passed inspection with no blocking feedback; its DoD is met as written.",
        "acceptance": [{"productId": "p1", "accepted": True, "versionId": "v2"}],
    },
    "presentation": {
        "reasoning": "The schema was the round's only news.",
        "messages": [{"content": "We specified the schema.", "asAgent": "operative-1"}]
    },
}


def test_step_outputs_cover_every_step():
    assert STEP_OUTPUTS == {
        "bootstrap": BootstrapOutput,
        "reflect": ReflectOutput,
        "plan": PlanOutput,
        "write": WriteOutput,
        "peer_review": PeerReviewOutput,
        "inspect": InspectOutput,
        "close": CloseOutput,
        "presentation": PresentationOutput,
    }


@pytest.mark.parametrize("step", list(STEP_EXAMPLES))
def test_step_output_round_trips_through_camel_case_json(step):
    model = STEP_OUTPUTS[step]
    value = model.model_validate_json(json.dumps(STEP_EXAMPLES[step]))
    dumped = value.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    assert dumped == STEP_EXAMPLES[step]
    assert model.model_validate(dumped) == value


def test_collabs_and_remarks_default_to_empty():
    output = WriteOutput.model_validate(STEP_EXAMPLES["write"])
    assert (output.collabs, output.remarks) == ([], [])
    assert BootstrapOutput.model_validate(BOOTSTRAP).missing_details == []
    assert PlanOutput.model_validate(PLAN).chair_versions == []


def test_plan_output_parses_nested_pieces():
    plan = PlanOutput.model_validate(PLAN)
    assert [type(operation) for operation in plan.tree_operations] == [AddProduct, RemoveProduct]
    assert plan.assignments[0].attached_context[0].include == ["content", "feedback"]
    assert plan.bootstrap_overrides.constraints == ["REST only", "No auth yet"]
    assert plan.bootstrap_overrides.mission is None


EXPECTED_PROPERTIES = {
    "bootstrap": (
        set(BOOTSTRAP) | {"missingDetails", "decisions"},
        [
            "thinking",
            "mission",
            "objectives",
            "constraints",
            "personas",
            "operativeDomains",
            "initialProducts",
        ],
    ),
    "reflect": ({"reasoning", "reflections", "collabs", "remarks"}, ["reasoning", "reflections"]),
    "plan": (
        set(PLAN) | {"chairVersions", "decisions"},
        ["thinking", "treeOperations", "assignments", "acceptance"],
    ),
    "write": ({"reasoning", "versions", "feedbackResponses", "collabs", "remarks"}, ["reasoning", "versions"]),
    "peer_review": ({"reasoning", "reviews", "collabs", "remarks"}, ["reasoning", "reviews"]),
    "inspect": ({"reasoning", "inspections", "collabs", "remarks"}, ["reasoning", "inspections"]),
    "close": ({"reasoning", "acceptance", "remarks", "done"}, ["reasoning", "acceptance"]),
    "presentation": ({"reasoning", "messages"}, ["reasoning", "messages"]),
}


@pytest.mark.parametrize("step", list(STEP_OUTPUTS))
def test_step_output_json_schema(step):
    jsonschema = pytest.importorskip("jsonschema")
    schema = STEP_OUTPUTS[step].model_json_schema(by_alias=True)
    jsonschema.Draft202012Validator.check_schema(schema)
    properties, required = EXPECTED_PROPERTIES[step]
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == properties
    assert schema["required"] == required
    jsonschema.validate(STEP_EXAMPLES[step], schema)
    json.dumps(schema)


def test_envelope_json_schemas():
    jsonschema = pytest.importorskip("jsonschema")
    request = RequestContextEnvelope.model_json_schema(by_alias=True)
    halt = HaltEnvelope.model_json_schema(by_alias=True)
    for schema in (request, halt):
        jsonschema.Draft202012Validator.check_schema(schema)
    requests = request["properties"]["requests"]
    assert (requests["minItems"], requests["maxItems"]) == (1, 5)
    assert request["$defs"]["ContextRequest"]["properties"]["need"]["enum"] == [
        "full_content",
        "version_history",
        "all_feedback",
        "inspections",
        "reflections",
        "peer_content",
        "source",
        "search_sources",
        "remarks",
    ]
    assert halt["properties"]["type"]["enum"] == ["question", "done"]
    assert halt["properties"]["message"]["maxLength"] == 2000


def test_schema_shows_enums_and_tree_operation_union():
    schema = PlanOutput.model_json_schema(by_alias=True)
    union = schema["properties"]["treeOperations"]["items"]
    assert union["discriminator"]["propertyName"] == "action"
    assert set(union["discriminator"]["mapping"]) == {"ADD", "REMOVE", "MOVE", "UPDATE"}
    assert schema["$defs"]["ProductType"]["enum"] == [
        "Content",
        "Decision",
        "Collection",
        "Orchestration",
    ]
    assert schema["$defs"]["AddProduct"]["properties"]["newId"]["pattern"] == r"^new-\d+$"


def test_allowed_envelopes():
    assert ALLOWED_ENVELOPES == {
        "bootstrap": {FINAL_OUTPUT, HALT},
        "reflect": {FINAL_OUTPUT, REQUEST_CONTEXT},
        "plan": {FINAL_OUTPUT, REQUEST_CONTEXT, HALT},
        "write": {FINAL_OUTPUT, REQUEST_CONTEXT},
        "peer_review": {FINAL_OUTPUT, REQUEST_CONTEXT},
        "inspect": {FINAL_OUTPUT, REQUEST_CONTEXT},
        "close": {FINAL_OUTPUT, REQUEST_CONTEXT, HALT},
        "presentation": {FINAL_OUTPUT, REQUEST_CONTEXT},
    }


def test_envelope_models_per_step():
    assert envelope_models("bootstrap") == {"final_output": BootstrapOutput, "halt": Halt}
    assert envelope_models("plan") == {
        "final_output": PlanOutput,
        "request_context": RequestContextEnvelope,
        "halt": Halt,
    }
    assert envelope_models("write") == {
        "final_output": WriteOutput,
        "request_context": RequestContextEnvelope,
    }


def test_initial_product_needs_owner():
    with pytest.raises(ValidationError) as error:
        InitialProduct.model_validate({"name": "x", "type": "Content", "dod": "d"})
    assert [(e["type"], e["loc"]) for e in error.value.errors()] == [("missing", ("owner",))]


def test_write_answers_feedback_as_reflect_does():
    write = WriteOutput.model_validate({**STEP_EXAMPLES["write"], "feedbackResponses": [
        {"collabId": "c1", "action": "defer", "rationale": "After the launch."}]})
    assert write.feedback_responses == [FeedbackResponse(collab_id="c1", action="defer", rationale="After the launch.")]
    assert WriteOutput.model_validate(STEP_EXAMPLES["write"]).feedback_responses == []


# A rule a step's prompt (prompts/steps/*.md) states in prose, and where its schema states it too.
PROSE_RULES = [
    (PresentationOutput, ("Message", "content"), "1 to 2 sentences (a third is rejected)"),
    (PresentationOutput, ("Message", "asAgent"), "Who speaks: chair-1 or an operative who did it; never the "
                                                 "Watchdog or the Envoy"),
    (PresentationOutput, ("messages",), "1 to 10 short messages; the same news once"),
    (PeerReviewOutput, ("Collab", "importance"), "1-10, honestly: 8 or more blocks the product's acceptance while "
                                                 "the collab is open (only for what must block); 4-7 for what the "
                                                 "next version should fix; 1-3 for nice-to-haves"),
    (InspectOutput, ("inspections",), "One per new version of this round; none skipped"),
    (BootstrapOutput, ("InitialProduct", "dod"), "The definition of done: criteria a reviewer can check in one "
                                                 "reading (never 'high quality')"),
    (BootstrapOutput, ("personas",), "A persona per agent id that fits what the agent does, except agents the "
                                     "user's cards give one: the Envoy only reports to the user (it never reviews); "
                                     "the Watchdog inspects; operatives write and review"),
    (ReflectOutput, ("Reflection", "dodStatus"), "Judged against the DoD as written; the Chair accepts a product "
                                                 "only on your met, so never claim it before it is true (not while "
                                                 "an inspection asks for changes)"),
    (WriteOutput, ("versions",), "One new version of every product assigned to you this round; none of any other"),
    (WriteOutput, ("NewVersion", "content"), "The real thing, complete, in Markdown as its readers will get it: "
                                             "never a placeholder, an outline of what you will write, or a plan to "
                                             "do it later"),
    (WriteOutput, ("FeedbackResponse", "action"), "accept: you take it: say the change (plannedChange) your "
                                                  "version makes or will make; defer: not now: it leaves the open "
                                                  "feedback (it no longer blocks acceptance) and stays listed as "
                                                  "deferred, to take up in a later version; reject: you will not "
                                                  "act on it: say why"),
    (PlanOutput, ("Acceptance", "rejectionReason"), "Required to reject: what the next version must change"),
    (PlanOutput, ("Directive", "objective"), "What to do, concrete enough to act on alone (not 'improve it')"),
    (HaltEnvelope, ("type",), "done: every product is accepted and the mission is met (say what was delivered); "
                              "question: the team cannot go on without the user's answer"),
]


@pytest.mark.parametrize(("model", "path", "description"), PROSE_RULES,
                         ids=[f"{m.__name__}.{'.'.join(p)}" for m, p, _ in PROSE_RULES])
def test_a_rule_stated_in_prose_is_in_the_schema_too(model, path, description):
    schema = model.model_json_schema(by_alias=True)
    node = schema
    for name in path:
        node = schema["$defs"][name] if name in schema.get("$defs", {}) else node["properties"][name]
    assert node["description"] == description
