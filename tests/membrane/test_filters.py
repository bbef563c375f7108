"""Template filters: each one's value, and what is wrong with a filter before it runs."""

from __future__ import annotations

import pytest

from cabal.errors import TemplateError
from cabal.membrane.filters import problem
from cabal.membrane.templates import Scope, interpolate

NODES = [
    {"id": "g2", "name": "Ship", "type": "goal", "priority": 2, "area": "b"},
    {"id": "g1", "name": "Test", "type": "goal", "priority": 1, "area": "a"},
    {"id": "b1", "type": "behavior", "priority": 1, "area": "b"},
]
CONTEXT = {"nodes": NODES, "title": "Release Plan v2", "none": None, "empty": "", "n": 3, "other": "fallback",
           "path": "docs/guide/README.md", "doc": "intro\n# The Guide\nbody", "words": "one two  three"}  # fmt: skip


def fill(template: str):
    return interpolate(template, Scope(CONTEXT))


@pytest.mark.parametrize(
    ("template", "value"),
    [
        ("{nodes|count}", 3),
        ("{none|count}", 0),
        ("{title|count}", 15),
        ("{nodes|first|field:id}", "g2"),
        ("{nodes|last|field:id}", "b1"),
        ("{none|first}", None),
        ("{nodes|map:id}", ["g2", "g1", "b1"]),
        ("{nodes|where:type=goal|map:name}", ["Ship", "Test"]),
        ("{nodes|where:priority=1|count}", 2),
        ("{nodes|sort:priority|map:id}", ["g1", "b1", "g2"]),
        ("{nodes|group:area|map:id}", ["g2", "b1", "g1"]),
        ("{n|range}", [1, 2, 3]),
        ("{none|default:\"none given\"}", "none given"),
        ("{empty|default:other}", "fallback"),
        ("{title|default:other}", "Release Plan v2"),
        ("{nodes|map:id|join}", "g2, g1, b1"),
        ("{nodes|map:id|join:\" / \"}", "g2 / g1 / b1"),
        ("{nodes|lines}", "- g2: Ship\n- g1: Test\n- b1"),
        ("{none|lines}", "(none)"),
        ("{nodes|numbered}", "1. g2: Ship\n2. g1: Test\n3. b1"),
        ("{nodes|names}", "Ship, Test, b1"),
        ("{nodes|ids}", "g2, g1, b1"),
        ("{n|pad:2}", "03"),
        ("{title|hash:6}", "9d647b"),
        ("{title|strip_prefix:\"Release \"}", "Plan v2"),
        ("{title|strip_prefix:\"Nope\"}", "Release Plan v2"),
        ("{title|compact}", "ReleasePlanv2"),
        ("{doc|title}", "The Guide"),
        ("{path|basename}", "README.md"),
        ("{words|words}", 3),
        ("{nodes|first|json}", '{"area": "b", "id": "g2", "name": "Ship", "priority": 2, "type": "goal"}'),
        ("{empty|is_empty}", True),
        ("{nodes|is_present}", True),
        ("v-{n|pad:3}", "v-003"),
    ],
)
def test_filter_values(template, value):
    assert fill(template) == value


@pytest.mark.parametrize(
    ("name", "arg", "message"),
    [
        ("shout", None, "unknown filter 'shout'"),
        ("truncate", None, "filter 'truncate' needs a number"),
        ("truncate", "x", "filter 'truncate' needs a number"),
        ("map", None, "filter 'map' needs a field name"),
        ("where", "type", "filter 'where' needs field=value"),
        ("slugify", "3", "filter 'slugify' takes no argument"),
        ("default", "two words", "filter 'default' needs a quoted text or a name"),
    ],
)
def test_problems_before_running(name, arg, message):
    assert problem(name, arg).startswith(message)


def test_the_compact_form_is_for_numeric_filters_only():
    assert problem("truncate50", None) is None and problem("pad2", None) is None
    assert problem("slugify2", None).startswith("unknown filter 'slugify2'")


def test_a_filter_on_the_wrong_kind_of_value_is_a_template_error():
    with pytest.raises(TemplateError, match="range needs a number"):
        fill("{nodes|range}")
    with pytest.raises(TemplateError, match="field:id needs a mapping"):
        fill("{title|field:id}")
    with pytest.raises(TemplateError, match="nothing by that name"):
        fill("{none|default:missing_name}")
