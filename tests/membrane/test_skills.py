"""Skills: the shipped Markdown files and the parser that reads their protocol tables."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cabal.errors import ProtocolLoadError, ProtocolProblem, ResourceNotFound
from cabal.skills import (
    GAP_DOMAINS,
    SECTIONS,
    TABLE_SECTION,
    V1_PROTOCOLS,
    Skill,
    SkillRow,
    list_skills,
    load_skill,
    load_skills,
    parse_skill,
)

SHIPPED = [
    "decision_capture",
    "escalation_handling",
    "feature_implementation",
    "health_coverage",
    "module_design",
    "progress_tracking",
]

# gap kind -> (skill of its domain, protocol the doctor starts)
GAP_TABLE = {
    "module_without_objectives": ("module_design", "add_objectives"),
    "behavior_without_validation": ("feature_implementation", "add_invariant"),
    "module_without_implementation": ("feature_implementation", "add_implementation"),
    "validation_without_health": ("health_coverage", "add_health_coverage"),
    "escalation_without_resolution": ("escalation_handling", "resolve_blocker"),
    "space_without_progress": ("progress_tracking", "record_work"),
}

EIGHT = {
    "explore_space",
    "add_objectives",
    "add_invariant",
    "add_health_coverage",
    "add_implementation",
    "record_work",
    "investigate",
    "resolve_blocker",
}


def skill_text(table: str, *, title: str = "Custom", extra: str = "") -> str:
    return (
        f"# {title} Skill\n"
        "\n"
        "## Domain\n"
        "\n"
        "Something.\n"
        "\n"
        "## When to Use Which Protocol\n"
        "\n"
        f"{table}"
        "\n"
        "## Process\n"
        "\n"
        "1. Do it.\n"
        f"{extra}"
    )


# ------------------------------------------------------------------------- shipped skills


def test_the_six_v1_skills_ship() -> None:
    assert list_skills() == SHIPPED


def test_v1_protocols_are_the_eight() -> None:
    assert V1_PROTOCOLS == EIGHT


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_skill_parses_with_all_seven_sections(name: str) -> None:
    skill = load_skill(name, allowed=V1_PROTOCOLS)
    assert skill.name == name
    assert skill.title == name.replace("_", " ").title()
    assert list(skill.sections) == list(SECTIONS)
    assert all(body.strip() for body in skill.sections.values())
    assert skill.text.startswith(f"# {skill.title} Skill\n")
    assert 60 <= len(skill.text.splitlines()) <= 120


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_skill_names_only_v1_protocols(name: str) -> None:
    skill = load_skill(name)
    assert len(skill.rows) >= 4
    assert set(skill.protocols()) <= EIGHT
    assert all(row.protocols for row in skill.rows)


@pytest.mark.parametrize("gap", sorted(GAP_TABLE))
def test_each_gap_selects_its_protocol(gap: str) -> None:
    skill_name, protocol = GAP_TABLE[gap]
    skill = load_skill(skill_name)
    assert skill.select_protocol(gap) == protocol
    assert skill.protocol_chain(gap) == (protocol,)


def test_each_gap_is_tagged_in_exactly_one_skill() -> None:
    tagged: dict[str, list[str]] = {}
    for name, skill in load_skills().items():
        for row in skill.rows:
            for gap in row.gaps:
                tagged.setdefault(gap, []).append(name)
    assert tagged == {gap: [skill_name] for gap, (skill_name, _) in GAP_TABLE.items()}


def test_gap_domains_match_the_shipped_tables() -> None:
    assert dict(GAP_DOMAINS) == {gap: skill_name for gap, (skill_name, _) in GAP_TABLE.items()}


def test_decision_capture_has_a_table_but_no_gap() -> None:
    skill = load_skill("decision_capture")
    assert skill.gaps() == ()
    assert len(skill.rows) == 7
    assert skill.rows[1] == SkillRow(
        situation="You made a choice that matters beyond this session and no escalation asked for it",
        protocols=("record_work", "resolve_blocker"),
        gaps=(),
    )


def test_shipped_chain_row() -> None:
    skill = load_skill("health_coverage")
    assert skill.rows[1].protocols == ("explore_space", "add_health_coverage")
    assert skill.protocols() == (
        "add_health_coverage",
        "explore_space",
        "investigate",
        "add_invariant",
        "record_work",
    )


def test_load_skill_accepts_the_file_name() -> None:
    assert load_skill("module_design.md").name == "module_design"


# -------------------------------------------------------------------------- user folders


def test_user_folder_overrides_a_skill_by_name(tmp_path: Path) -> None:
    table = "| Situation | Protocol |\n|---|---|\n| Mine (`gap:validation_without_health`) | `protocol:investigate` |\n"
    (tmp_path / "health_coverage.md").write_text(skill_text(table, title="My Health"), encoding="utf-8")
    (tmp_path / "team_rules.md").write_text(skill_text(table, title="Team Rules"), encoding="utf-8")

    skill = load_skill("health_coverage", [tmp_path])
    assert skill.title == "My Health"
    assert skill.path == tmp_path / "health_coverage.md"
    assert skill.select_protocol("validation_without_health") == "investigate"
    assert list_skills([tmp_path]) == sorted([*SHIPPED, "team_rules"])
    # the built-in one is untouched without the user folder
    assert load_skill("health_coverage").select_protocol("validation_without_health") == "add_health_coverage"


def test_later_folder_wins(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    for folder, protocol in ((first, "investigate"), (second, "record_work")):
        table = f"| Situation | Protocol |\n|---|---|\n| Gap (`gap:space_without_progress`) | `protocol:{protocol}` |\n"
        (folder / "progress_tracking.md").write_text(skill_text(table), encoding="utf-8")
    assert load_skill("progress_tracking", [first, second]).select_protocol("space_without_progress") == "record_work"
    assert load_skill("progress_tracking", [second, first]).select_protocol("space_without_progress") == "investigate"


def test_missing_skill_lists_the_known_ones() -> None:
    with pytest.raises(ResourceNotFound) as caught:
        load_skill("gardening")
    error = caught.value
    assert (error.kind, error.name, error.known) == ("skill", "gardening", SHIPPED)
    assert str(error) == f"skill not found: 'gardening' (known: {', '.join(SHIPPED)})"


def test_user_skill_without_table_is_a_located_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.md"
    path.write_text(skill_text("Pick whatever feels right.\n"), encoding="utf-8")
    with pytest.raises(ProtocolLoadError) as caught:
        load_skill("broken", [tmp_path])
    assert caught.value.problems == [
        ProtocolProblem(
            file=str(path),
            message="section has no Situation | Protocol table",
            field=TABLE_SECTION,
            line=7,
        )
    ]
    with pytest.raises(ProtocolLoadError):
        load_skills([tmp_path])


# --------------------------------------------------------------------------------- parsing


def test_skill_without_the_section_is_an_error() -> None:
    text = "# Bare Skill\n\n## Domain\n\nOnly prose.\n"
    with pytest.raises(ProtocolLoadError) as caught:
        parse_skill(text, "bare")
    assert caught.value.problems == [
        ProtocolProblem(
            file="bare.md",
            message=f"no '## {TABLE_SECTION}' section: a skill needs its Situation | Protocol table",
            field=TABLE_SECTION,
            line=None,
        )
    ]


def test_chain_row_returns_the_chain() -> None:
    table = (
        "| Situation | Protocol |\n"
        "|-----------|----------|\n"
        "| New area (`gap:module_without_objectives`) | `protocol:explore_space` → `protocol:add_objectives` |\n"
    )
    skill = parse_skill(skill_text(table), "custom")
    assert skill.select_protocol("module_without_objectives") == "explore_space"
    assert skill.protocol_chain("module_without_objectives") == ("explore_space", "add_objectives")
    assert skill.rows == (
        SkillRow(
            situation="New area (`gap:module_without_objectives`)",
            protocols=("explore_space", "add_objectives"),
            gaps=("module_without_objectives",),
        ),
    )
    assert skill.rows[0].line == 11


def test_unknown_gap_selects_nothing() -> None:
    skill = load_skill("module_design")
    assert skill.select_protocol("no_such_gap") is None
    assert skill.protocol_chain("no_such_gap") == ()
    assert skill.row_for("no_such_gap") is None


def test_tables_without_outer_pipes_with_alignment_and_ascii_arrows() -> None:
    table = (
        "Situation | Notes | Protocol\n"
        ":--- | :---: | ---:\n"
        "Escaped \\| pipe (`gap:a_gap`) | code `x | y` stays whole | explore_space -> investigate\n"
        "Plain | - | `record_work`\n"
    )
    skill = parse_skill(skill_text(table), "loose", allowed=V1_PROTOCOLS)
    assert skill.rows == (
        SkillRow(situation="Escaped | pipe (`gap:a_gap`)", protocols=("explore_space", "investigate"), gaps=("a_gap",)),
        SkillRow(situation="Plain", protocols=("record_work",), gaps=()),
    )


def test_code_fences_hide_headings_and_tables() -> None:
    extra = (
        "\n## Examples\n\n"
        "```markdown\n"
        "## When to Use Which Protocol\n"
        "| Situation | Protocol |\n"
        "|---|---|\n"
        "| Fake | `protocol:fake` |\n"
        "```\n"
        "\n"
        "### A sub-heading stays in the section\n"
    )
    table = "| Situation | Protocol |\n|---|---|\n| Real | `protocol:investigate` |\n"
    skill = parse_skill(skill_text(table, extra=extra), "fenced", allowed=V1_PROTOCOLS)
    assert list(skill.sections) == ["Domain", TABLE_SECTION, "Process", "Examples"]
    assert "### A sub-heading stays in the section" in skill.sections["Examples"]
    assert "protocol:fake" in skill.sections["Examples"]
    assert skill.protocols() == ("investigate",)
    assert skill.section("when to use which protocol:") == skill.sections[TABLE_SECTION]


def test_every_row_problem_is_reported_at_once() -> None:
    table = (
        "| Situation | Protocol |\n"
        "|---|---|\n"
        "| Unknown (`gap:g1`) | `protocol:deploy_everything` |\n"
        "| Empty | |\n"
        "| Prose | ask a human |\n"
        "| Twice (`gap:g1`) | `protocol:investigate` |\n"
    )
    with pytest.raises(ProtocolLoadError) as caught:
        parse_skill(skill_text(table), "bad", allowed=V1_PROTOCOLS)
    known = ", ".join(sorted(EIGHT))
    assert caught.value.problems == [
        ProtocolProblem(
            "bad.md", f"unknown protocol 'deploy_everything' (known: {known})", field=TABLE_SECTION, line=11
        ),
        ProtocolProblem("bad.md", "row names no protocol", field=TABLE_SECTION, line=12),
        ProtocolProblem(
            "bad.md",
            "cannot read a protocol name in 'ask a human'; write `protocol:NAME`",
            field=TABLE_SECTION,
            line=13,
        ),
        ProtocolProblem("bad.md", "gap 'g1' is already tagged on line 11", field=TABLE_SECTION, line=14),
    ]


def test_unknown_protocols_pass_without_an_allowed_set() -> None:
    table = "| Situation | Protocol |\n|---|---|\n| Ours | `protocol:deploy_everything` |\n"
    assert parse_skill(skill_text(table), "ours").protocols() == ("deploy_everything",)


def test_single_column_table_is_an_error() -> None:
    table = "| Protocol |\n|---|\n| `protocol:investigate` |\n"
    with pytest.raises(ProtocolLoadError) as caught:
        parse_skill(skill_text(table), "narrow")
    assert caught.value.problems == [
        ProtocolProblem(
            "narrow.md", "table needs a Situation column and a Protocol column", field=TABLE_SECTION, line=9
        )
    ]


def test_skill_is_frozen_and_hashable() -> None:
    skill = load_skill("progress_tracking")
    assert isinstance(skill, Skill)
    with pytest.raises(dataclasses.FrozenInstanceError):
        skill.name = "other"  # type: ignore[misc]
    assert hash(skill) == hash(load_skill("progress_tracking"))
    assert skill == load_skill("progress_tracking")
