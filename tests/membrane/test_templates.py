"""Templates and conditions: pure, no graph."""

from __future__ import annotations

import pytest

from cabal.errors import TemplateError
from cabal.membrane.templates import (
    PENDING,
    ConditionSyntaxError,
    Scope,
    Unresolved,
    check,
    compile_condition,
    evaluate,
    interpolate,
    slugify,
)

CONTEXT = {
    "title": "Charges Are Idempotent!",
    "count": 3,
    "tags": ["a", "b"],
    "details": {"rule": "once", "items": [{"c": "deep"}], "note": None},
    "empty": "",
}


def fill(template, context=CONTEXT, **locals_):
    return interpolate(template, Scope(context, locals_))


def test_plain_and_nested_references():
    assert fill("v-{title}") == "v-Charges Are Idempotent!"
    assert fill("{details.rule}") == "once"
    assert fill("x {details.items.0.c} y") == "x deep y"


def test_filters_with_and_without_spaces():
    assert fill("{title|slugify}") == "charges-are-idempotent"
    assert fill("{ title | slugify }") == "charges-are-idempotent"
    assert fill("{title|lower}-{title | upper}") == "charges are idempotent!-CHARGES ARE IDEMPOTENT!"
    assert fill("{title|truncate:7}") == "Charges"
    assert fill("{title | slugify | truncate: 7}") == "charges"


def test_a_single_reference_keeps_its_type():
    assert fill("{count}") == 3
    assert fill("{tags}") == ["a", "b"]
    assert fill("{details}") == CONTEXT["details"]
    assert fill("n={count}") == "n=3"
    assert fill("{tags} and more") == '["a", "b"] and more'


def test_item_and_index_inside_for_each():
    assert fill("{item.id}-{index}", item={"id": "b1"}, index=2) == "b1-2"


def test_timestamp_builtin_and_a_pinned_one():
    assert fill("{timestamp}")[:2] == "20"
    assert fill("{timestamp}", {"timestamp": "T0"}) == "T0"


def test_missing_reference_is_an_error_not_an_empty_string():
    with pytest.raises(TemplateError, match="nothing by that name"):
        fill("v-{nope}")
    with pytest.raises(TemplateError, match="details.missing"):
        fill("{details.missing}")
    with pytest.raises(TemplateError, match="index out of range"):
        fill("{tags.5}")


def test_an_empty_value_in_an_id_is_refused():
    with pytest.raises(TemplateError, match="empty"):
        interpolate("v-{empty}", Scope(CONTEXT), nonempty=True)
    with pytest.raises(TemplateError, match="empty"):
        interpolate("{details.note}", Scope(CONTEXT), nonempty=True)
    assert interpolate("{details.note}", Scope(CONTEXT)) is None


def test_escapes_and_non_references_stay_literal():
    assert fill("{{title}}") == "{title}"
    assert fill("a {not a ref} b") == "a {not a ref} b"
    assert fill("[0-9]{2,3}") == "[0-9]{2,3}"


def test_structures_are_filled_item_by_item():
    assert fill({"a": "{count}", "b": ["{title|slugify}", 1]}) == {"a": 3, "b": ["charges-are-idempotent", 1]}


def test_pending_values_raise_unresolved():
    with pytest.raises(Unresolved):
        fill("{later}", {"later": PENDING})
    with pytest.raises(Unresolved):
        fill("{later.field}", {"later": PENDING})


def test_check_reports_unknown_filters_and_bad_arguments():
    assert check("{a|slugify}") == []
    assert "unknown filter 'shout'" in check("{a|shout}")[0]
    assert "needs a number" in check("{a|truncate}")[0]


def test_slugify():
    assert slugify("Crème brûlée -- 2x") == "creme-brulee-2x"


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ("count > 2", True),
        ("count > 2 and title == 'x'", False),
        ("not (count == 3) or 'a' in tags", True),
        ("len(tags) == 2", True),
        ("details.rule == 'once'", True),
        ("details['items'][0].c == 'deep'", True),
        ("details.note is None", True),
        ("details.note == null", True),
        ("count in [1, 2, 3]", True),
        ("'z' not in tags", True),
        ("-count < 0", True),
        ("title", "Charges Are Idempotent!"),
    ],
)
def test_conditions(condition, expected):
    assert evaluate(condition, Scope(CONTEXT)) == expected


@pytest.mark.parametrize(
    "condition",
    [
        "__import__('os').system('true')",
        "count.__class__",  # attribute access is dict access: no such field, never a dunder
        "lambda: 1",
        "[x for x in tags]",
        "count + 1 > 2",
        "open('f')",
        "tags.pop()",
        "a if b else c",
    ],
)
def test_forbidden_condition_syntax(condition):
    with pytest.raises((ConditionSyntaxError, TemplateError)):
        evaluate(condition, Scope(CONTEXT))


def test_condition_syntax_is_checked_before_running():
    with pytest.raises(ConditionSyntaxError, match="only call allowed"):
        compile_condition("print(1)")
    with pytest.raises(ConditionSyntaxError, match="not a valid expression"):
        compile_condition("count >")


def test_condition_errors_and_pending():
    with pytest.raises(TemplateError):
        evaluate("missing == 1", Scope(CONTEXT))
    with pytest.raises(Unresolved):
        evaluate("later == 'x'", Scope({"later": PENDING}))
    # short-circuit: a pending value that is never needed does not stop anything
    assert evaluate("count == 3 or later", Scope({**CONTEXT, "later": PENDING})) is True
