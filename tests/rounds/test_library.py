"""Memory across missions: the workspace's library of accepted work and the user's standing facts.

Every workspace here is its own home on the session's one server (reached by its URL, as a
server several workspaces share): what one keeps must never reach another.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cabal.cli import main
from cabal.graph import ContextGraph
from cabal.errors import ConfigError, ResourceNotFound
from cabal.rounds.api import run_mission
from cabal.rounds.library import (facts, forget_fact, keep_facts, library_graph, library_items, mission_sources,
                                  search_library, told_in)
from cabal.rounds.sources import changed_sources, read_source_text, search_text, source_line
from cabal.rounds.workspace import Workspace
from cabal.sources import latest_versions

ROOT = Path(__file__).resolve().parents[2]
LAUNCH = ROOT / "examples" / "launch" / "launch.mission.yaml"
SOURCES = ROOT / "examples" / "sources"
STUDENTS = "Students first: university students who take lecture notes. Teachers come later."


@pytest.fixture(scope="module")
def url(graph_server) -> str:
    return f"unix://{graph_server.socket_path}"


@pytest.fixture(scope="module")
def launched(url: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Workspace, str]:
    """A workspace whose one mission (the launch example) accepted three products."""
    home = tmp_path_factory.mktemp("library") / ".cabal"
    result = run_mission(LAUNCH, home=home, url=url)
    assert result.state == "done"
    return Workspace.at(home, url), result.mission_id


def later_mission(tmp_path: Path, source: str = "", extra: str = "") -> Path:
    """The sources example (its script cites s1 to s3) with ``source`` after its sources' entries
    and ``extra`` at the end of its mission file."""
    folder = tmp_path / "sources"
    shutil.copytree(SOURCES, folder)
    mission = folder / "sources.mission.yaml"
    text = mission.read_text().replace("\ntools:\n", "\n" + source + "tools:\n")
    mission.write_text(text + extra)
    return mission


def test_the_library_lists_every_accepted_product_newest_first(launched, capsys) -> None:
    workspace, mission_id = launched

    assert [(i.name, i.version, i.kind, i.round) for i in library_items(workspace)] == [
        ("Pricing decision", 2, "Decision", 2), ("Launch-day checklist", 1, "Content", 2),
        ("Launch brief", 1, "Content", 1)]
    assert main(["library", "--home", str(workspace.home), "--url", str(workspace.url)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[:3] == [
        "3 accepted product(s), newest first:",
        f"{mission_id}  Pricing decision (version 2, Decision, round 2)",
        "  Plans: Free (three notebooks, sync on two devices) and Plus at 6 euros a month. Student discount: P…"]


def test_library_search_finds_products_by_the_full_text_index(launched, capsys) -> None:
    workspace, mission_id = launched

    found = search_library(workspace, "checklist stores release")
    assert [item.name for item in found.items][:1] == ["Launch-day checklist"]
    assert search_library(workspace, "zeppelin").items == ()
    # Only words reach the index's query syntax.
    assert [i.name for i in search_library(workspace, 'checklist) | @words:{*} "').items][:1] == [
        "Launch-day checklist"]
    assert main(["library", "search", "euros", "discount", "--home", str(workspace.home),
                 "--url", str(workspace.url)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == f"{mission_id}  Pricing decision (version 2, Decision, round 2)"


def test_a_later_mission_reads_an_earlier_one_as_sources_cited_like_files(launched, tmp_path: Path) -> None:
    workspace, earlier = launched
    mission = later_mission(tmp_path, f"  - {{mission: {earlier}, note: Our launch plan from March}}\n")

    result = run_mission(mission, home=workspace.home, url=workspace.url)
    assert (result.state, result.failed_turns) == ("done", 0)
    with ContextGraph.open(workspace.url, name=result.mission_id) as graph:
        current = {s["source_id"]: s for s in latest_versions(graph.find("source"))}
        assert [(s["source_id"], s["name"]) for s in current.values()][3:] == [
            ("s4", f"{earlier}: Launch brief (version 1)"),
            ("s5", f"{earlier}: Pricing decision (version 2)"),
            ("s6", f"{earlier}: Launch-day checklist (version 1)"),
            ("s7", f"{earlier}: decisions and the user's answers")]
        # The team's list says where each came from: mission, product, version.
        assert source_line(current["s5"]).splitlines()[1:] == [
            f"  from: mission {earlier} (launch-plan), product {_product_id(workspace, earlier, 'Pricing decision')} "
            "'Pricing decision', version 2, accepted at round 2",
            "  note: Our launch plan from March"]
        assert search_text(graph, "euros student discount", 60).splitlines()[1].startswith("[[s:s5#")
        answers = read_source_text(graph, "s7", current, 5000)
        assert f"> - round 0, answer: {STUDENTS}" in answers
        assert "> # The Chair's decisions" in answers


def _product_id(workspace: Workspace, mission_id: str, name: str) -> str:
    with ContextGraph.open(workspace.url, name=mission_id) as graph:
        return next(p["id"] for p in graph.find("product") if p["name"] == name)


def test_an_unknown_earlier_mission_is_refused_where_the_file_names_it(launched, tmp_path: Path) -> None:
    workspace, _ = launched
    mission = later_mission(tmp_path, "  - mission: m-nothing-000000\n")

    assert main(["run", str(mission), "--home", str(workspace.home), "--url", str(workspace.url)]) == 2


def test_a_mission_that_asks_for_nothing_reads_no_memory(launched, tmp_path: Path) -> None:
    workspace, _ = launched
    keep_facts(workspace, [("Priya (head of operations) signs off every plan", "typed", "")])
    result = run_mission(later_mission(tmp_path), home=workspace.home, url=workspace.url)
    with ContextGraph.open(workspace.url, name=result.mission_id) as graph:
        assert sorted(s["id"] for s in graph.find("source")) == ["s1", "s2", "s3"]
        assert {s["origin"] for s in graph.find("source")} == {""}


def test_memory_library_and_facts_become_sources_and_a_forgotten_fact_leaves_no_copy(
        url: str, tmp_path: Path, capsys) -> None:
    home = tmp_path / "facts" / ".cabal"
    earlier = run_mission(LAUNCH, home=home, url=url).mission_id
    assert main(["memory", "keep", earlier, "--home", str(home), "--url", url]) == 0
    assert capsys.readouterr().out == f"kept f1  {STUDENTS}\n  (answer in mission {earlier})\n"
    assert main(["memory", "add", "Priya (head of operations) signs off every plan", "--home", str(home),
                 "--url", url]) == 0
    assert main(["memory", "edit", "f2", "Priya (head of operations) signs off every plan in writing",
                 "--home", str(home), "--url", url]) == 0
    capsys.readouterr()
    workspace = Workspace.at(home, url)

    mission = later_mission(tmp_path, extra="memory: {library: true, facts: true}\n")
    result = run_mission(mission, home=home, url=url)
    with ContextGraph.open(url, name=result.mission_id) as graph:
        current = {s["source_id"]: s for s in latest_versions(graph.find("source"))}
        assert [s["name"] for s in current.values()][3:] == [
            f"{earlier}: Pricing decision (version 2)", f"{earlier}: Launch-day checklist (version 1)",
            f"{earlier}: Launch brief (version 1)", "standing facts"]
        assert read_source_text(graph, "s7", current, 5000).splitlines()[1:] == [
            "[[s:s7#1]] (fact f1)", f"> {STUDENTS}",
            "[[s:s7#2]] (fact f2)", "> Priya (head of operations) signs off every plan in writing"]
        assert search_text(graph, "Priya", 200).splitlines()[1] == "[[s:s7#2]] (fact f2)"
        # search_sources searches the library as it stood: the earlier mission's pricing is found and cited.
        assert search_text(graph, "euros student discount", 60).splitlines()[1].startswith("[[s:s4#")

    assert [f.id for f in search_library(workspace, "Priya writing").facts] == ["f2"]
    assert main(["memory", "forget", "f2", "--home", str(home), "--url", url]) == 0
    assert capsys.readouterr().out == "forgot f2: Priya (head of operations) signs off every plan in writing\n"
    # Gone from the list and from the index: nothing in the library's search finds it again.
    assert [f.id for f in facts(workspace)] == ["f1"]
    assert search_library(workspace, "Priya writing") == search_library(workspace, "zeppelin")
    with library_graph(workspace) as library:
        assert library.search_full_text("fact", "Priya") == []
        assert [n for n in library.find("library_item") if "Priya" in n["content"]] == []
    # A new fact never takes a forgotten one's id.
    assert [f.id for f in keep_facts(workspace, [("Omar approves budgets", "typed", "")])] == ["f3"]
    assert main(["memory", "forget", "f2", "--home", str(home), "--url", url]) == 2
    assert "no fact 'f2'; closest: f1" in capsys.readouterr().err


def test_one_workspaces_memory_never_reaches_another_on_the_same_server(launched, url: str, tmp_path: Path) -> None:
    workspace, _ = launched
    other = Workspace.at(tmp_path / "other" / ".cabal", url)
    keep_facts(workspace, [("Only the first workspace knows this", "typed", "")])

    assert library_items(other) == []
    assert facts(other) == []
    assert search_library(other, "launch checklist Only first workspace knows") == search_library(other, "zeppelin")
    assert library_graph(other).name != library_graph(workspace).name
    # Nor can a mission of the other workspace name it, nor its user keep what was told it.
    _, earlier = launched
    with pytest.raises(ConfigError, match=f"sources\\[0\\]: mission not found: '{earlier}'"):
        mission_sources(other, earlier, None, "other.mission.yaml:3: sources[0]")
    with pytest.raises(ResourceNotFound):
        told_in(other, earlier)


def test_a_resume_reads_no_file_for_text_from_an_earlier_mission(launched, tmp_path: Path) -> None:
    workspace, earlier = launched
    result = run_mission(later_mission(tmp_path, f"  - mission: {earlier}\n"), home=workspace.home, url=workspace.url)
    with ContextGraph.open(workspace.url, name=result.mission_id) as graph:
        current = latest_versions(graph.find("source"))
    # The files are read again (none changed); the earlier mission's text has no file to miss.
    assert changed_sources(None, result.mission_id, current, 1, max_bytes=10**6) == ([], [])  # type: ignore[arg-type]


def test_a_fact_that_is_not_there_is_a_users_mistake(launched) -> None:
    workspace, _ = launched
    with pytest.raises(ConfigError, match="^no fact 'f99'"):
        forget_fact(workspace, "f99")
    with pytest.raises(ConfigError, match="^a fact cannot be empty"):
        keep_facts(workspace, [("  ", "typed", "")])


def test_a_batch_plans_a_mission_that_names_an_earlier_one(tmp_path: Path) -> None:
    from cabal.batch.plan import load_plan

    (tmp_path / "notes.md").write_text("# Notes\n")
    (tmp_path / "training.mission.yaml").write_text(
        "request: Plan the training.\nsources:\n  - notes.md\n  - {mission: m-onboarding-1a2b3c}\n")

    (planned,) = load_plan(tmp_path).missions
    assert planned.error is None
    assert [(entry.path, entry.mission) for entry in planned.spec.sources] == [
        (str(tmp_path / "notes.md"), None), (None, "m-onboarding-1a2b3c")]
