"""Whole missions through other providers' real clients: ``openai:`` (the openai SDK through
langchain-openai) and ``ollama:`` (the ollama client through langchain-ollama), against the
local fake servers, which play the examples' scripts. Both examples end done on both; an
OpenAI outage pauses the mission and resume ends with the graph of an undisturbed run; no
request carries Anthropic's cache markup; no key reaches any output or file."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from cabal.rounds.api import resume_mission, run_mission
from cabal.rounds.events import ModelRetried
from cabal.rounds.mission import load_mission
from cabal.rounds.workspace import Workspace
from cabal.web.app import create_app
from cabal.web.security import Security
from tests.llm.fake_anthropic import CannedResponse, Disconnect, Hang
from tests.llm.fake_ollama import FakeOllama, ollama_script_responder
from tests.llm.fake_openai import TEST_KEY as OPENAI_KEY
from tests.llm.fake_openai import FakeOpenAI, error_body, openai_script_responder

from .test_outages import Outages, the_work

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = {name: (ROOT / "examples" / name / f"{name}.mission.yaml", ROOT / "examples" / name / f"{name}.script.yaml")
            for name in ("launch", "research")}
CABAL = Path(sys.executable).with_name("cabal")


def example(name: str):
    spec, _ = load_mission(EXAMPLES[name][0])
    return spec.model_copy(update={"model": None})


def no_cache_markup(requests) -> bool:
    return all("cache_control" not in json.dumps(r.body) for r in requests)


@pytest.mark.parametrize("name", ["launch", "research"])
def test_the_examples_end_done_through_openai(openai_api: FakeOpenAI, graph_server, name: str) -> None:
    openai_api.respond_with(openai_script_responder(EXAMPLES[name][1]))

    result = run_mission(example(name), model="openai:gpt-4.1-mini", home=graph_server.home)

    assert (result.state, result.stop_reason, result.failed_turns) == ("done", "concluded", 0)
    assert result.usage.calls == len(openai_api.requests)
    assert no_cache_markup(openai_api.requests)
    # OpenAI's automatic cache: the stable prefix (tools, role block, charter) repeats, and is counted.
    assert 0 < result.usage.cache_read_tokens < result.usage.input_tokens
    assert result.cost_usd > 0  # genai-prices knows gpt-4.1-mini


@pytest.mark.parametrize("name", ["launch", "research"])
def test_the_examples_end_done_through_ollama(ollama_api: FakeOllama, graph_server, name: str) -> None:
    ollama_api.respond_with(ollama_script_responder(EXAMPLES[name][1]))

    result = run_mission(example(name), model="ollama:qwen3:8b", home=graph_server.home)

    assert (result.state, result.stop_reason, result.failed_turns) == ("done", "concluded", 0)
    assert {r.path for r in ollama_api.requests} == {"/api/chat"}
    assert no_cache_markup(ollama_api.requests)
    assert (result.usage.cache_read_tokens, result.cost_usd) == (0, 0.0)  # a local model: no price known


def test_a_model_its_server_refuses_tools_for_goes_to_json_answers_once_and_the_mission_ends_done(
        ollama_api: FakeOllama, graph_server) -> None:
    # Ollama answers 400 "... does not support tools" for a model without tool calling: the
    # mission switches that model to json answers once (the first call, the Chair's bootstrap,
    # is made again at once without tools) and goes on through the real client.
    ollama_api.respond_with(ollama_script_responder(EXAMPLES["launch"][1]))
    ollama_api.refuse_tools = True
    events: list = []

    result = run_mission(example("launch"), model="ollama:gemma:2b", home=graph_server.home, on_event=events.append)

    assert (result.state, result.stop_reason, result.failed_turns) == ("done", "concluded", 0)
    assert [(e.kind, e.model) for e in events if e.kind == "model_output_switched"] == [
        ("model_output_switched", "ollama:gemma:2b")]
    offered = [r for r in ollama_api.requests if r.body.get("tools")]
    assert len(offered) == 1 and len(ollama_api.requests) == result.usage.calls + 1  # the refused call is not usage


def test_a_mission_files_price_prices_a_local_model(ollama_api: FakeOllama, graph_server) -> None:
    ollama_api.respond_with(ollama_script_responder(EXAMPLES["launch"][1]))
    spec = example("launch")
    price = {"input_per_mtok": 1.0, "output_per_mtok": 2.0}

    result = run_mission(spec, model="ollama:priced-model", home=graph_server.home, model_settings={"price": price})

    expected = (result.usage.input_tokens * 1.0 + result.usage.output_tokens * 2.0) / 1_000_000
    assert result.cost_usd == pytest.approx(expected, abs=1e-6)


def test_a_local_model_without_a_price_reads_not_priced_and_says_how_to_price_it(ollama_api: FakeOllama, graph_server,
                                                                                 tmp_path: Path) -> None:
    ollama_api.respond_with(ollama_script_responder(EXAMPLES["launch"][1]))
    home = str(graph_server.home)

    ran = subprocess.run([str(CABAL), "run", str(EXAMPLES["launch"][0]), "--model", "ollama:qwen3:8b", "--home", home],
                         capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)

    assert ran.returncode == 0, ran.stderr
    mission_id = re.search(r"^mission: (\S+)$", ran.stdout, re.MULTILINE)[1]
    hint = ("qwen3:8b is not priced: to count its cost, give the model a price in the mission file (model: "
            "{name: ..., price: {input_per_mtok: N, output_per_mtok: N}}, US dollars per million tokens)")
    assert re.search(r"^round 1 · write · .* · [\d,]+ tokens · not priced$", ran.stdout, re.MULTILINE)
    assert "$0.0000" not in ran.stdout
    usage = next(line for line in ran.stdout.splitlines() if line.startswith("usage: "))
    assert usage.endswith(" cached, not priced")
    assert hint in ran.stdout.splitlines()
    status = subprocess.run([str(CABAL), "status", mission_id, "--home", home], capture_output=True, text=True)
    assert re.search(r"^usage: \d+ calls, [\d,]+ tokens, not priced$", status.stdout, re.MULTILINE)
    assert hint in status.stdout.splitlines()
    page, markdown = tmp_path / "report.html", tmp_path / "report.md"
    for target in (page, markdown):
        exported = subprocess.run([str(CABAL), "export", mission_id, "-o", str(target), "--home", home,
                                   "--format", target.suffix[1:]], capture_output=True, text=True)
        assert exported.returncode == 0, exported.stderr
        assert "$0.0000" not in target.read_text() and "not priced" in target.read_text()
    assert f"<p class=\"muted\">{hint}</p>" in page.read_text()
    assert f"\n{hint}.\n" in markdown.read_text()
    assert re.search(r"^In all: \d+ turns, .* cached, not priced\.$", markdown.read_text(), re.MULTILINE)
    # The web room's list and mission page say it as the exports do.
    app = create_app(Workspace.at(home), Security.for_address("127.0.0.1", 8765), poll_s=0.2)
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        listing, page = client.get("/").text, client.get(f"/missions/{mission_id}").text
    row = listing.split(f'data-mission="{mission_id}"', 1)[1].split("</a>", 1)[0]
    assert "<b>not priced</b>" in row and "$0.0000" not in row
    assert f"<p class=\"muted\">{hint}</p>" in page and "$0.0000" not in page


def test_an_openai_outage_pauses_the_mission_and_resume_ends_with_the_graph_of_a_calm_run(
        openai_api: FakeOpenAI, graph_server) -> None:
    home = graph_server.home
    settings = {"max_retries": 2, "timeout_s": 0.5}
    launch_script = EXAMPLES["launch"][1]
    openai_api.respond_with(Outages({}, responder=openai_script_responder(launch_script)))
    calm = run_mission(example("launch"), model="openai:gpt-4.1-mini", home=home, model_settings=settings)
    assert (calm.state, calm.stop_reason) == ("done", "concluded")

    def failure(status: int, retry_after: float | None = 0.01) -> CannedResponse:
        return CannedResponse(status, error_body("try later", "server_error"),
                              {"retry-after": str(retry_after)} if retry_after is not None else {})

    openai_api.respond_with(Outages({
        5: [failure(429), failure(503), failure(500, retry_after=None)],
        14: [Hang(seconds=1.5), Disconnect("before_response"), CannedResponse(200, b"<html>502 Bad Gateway</html>")],
    }, responder=openai_script_responder(launch_script)))
    events: list = []

    first = run_mission(example("launch"), model="openai:gpt-4.1-mini", home=home, model_settings=settings,
                        on_event=events.append)

    assert (first.state, first.round) == ("interrupted", 1)
    assert first.detail == "the model is unavailable: openai returned 500: try later"
    assert [(e.retry, e.wait_s) for e in events if isinstance(e, ModelRetried)] == [(1, 0.01), (2, 0.01)]
    second = resume_mission(first.mission_id, home=home, model_settings=settings)
    assert (second.state, second.round) == ("interrupted", 2)
    third = resume_mission(first.mission_id, home=home, model_settings=settings)
    assert (third.state, third.stop_reason, third.round) == ("done", "concluded", 2)
    assert the_work(home, first.mission_id) == the_work(home, calm.mission_id)


def test_cabal_run_with_openai_loads_no_anthropic_leaks_no_key_and_ends_done(
        openai_api: FakeOpenAI, graph_server, tmp_path: Path) -> None:
    openai_api.respond_with(openai_script_responder(EXAMPLES["launch"][1]))
    probe = ("import json, sys\nfrom cabal.cli import main\ncode = main(sys.argv[1:])\n"
             "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('anthropic', 'langchain_anthropic'))),"
             " file=sys.stderr)\nsys.exit(code)")
    env = {**os.environ, "CABAL_HOME": str(graph_server.home)}
    result = subprocess.run([sys.executable, "-c", probe, "run", str(EXAMPLES["launch"][0]), "--model",
                             "openai:gpt-4.1-mini"], capture_output=True, text=True, timeout=120, cwd=ROOT,
                            env=env)

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stderr.strip().splitlines()[-1]) == []
    assert OPENAI_KEY not in result.stdout + result.stderr
    assert all(r.api_key == OPENAI_KEY for r in openai_api.requests)  # it was sent, to the server only
    leaked = [path for path in Path(graph_server.home).rglob("*") if path.is_file() and OPENAI_KEY.encode()
              in path.read_bytes()]
    assert leaked == []


def test_cabal_run_with_claude_loads_no_openai(graph_server, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.llm.fake_anthropic import fake_api
    from tests.llm.script_responder import script_responder

    probe = ("import json, sys\nfrom cabal.cli import main\ncode = main(sys.argv[1:])\n"
             "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('openai', 'langchain_openai', "
             "'ollama', 'langchain_ollama'))), file=sys.stderr)\nsys.exit(code)")
    with fake_api(monkeypatch, "sk-ant-test-probe-0001") as server:
        server.respond_with(script_responder(EXAMPLES["launch"][1]))
        env = {**os.environ, "CABAL_HOME": str(graph_server.home)}
        result = subprocess.run([sys.executable, "-c", probe, "run", str(EXAMPLES["launch"][0]), "--model",
                                 "claude-sonnet-4-6"], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stderr.strip().splitlines()[-1]) == []


def test_simulated_runs_a_mission_offline(graph_server) -> None:
    result = run_mission(example("launch"), model="simulated", home=graph_server.home)

    assert (result.state, result.failed_turns, result.cost_usd) == ("done", 0, 0.0)


def test_a_py_model_next_to_the_mission_file_is_found_first_and_kept_for_resume(graph_server, tmp_path: Path) -> None:
    from cabal.graph import ContextGraph

    (tmp_path / "team_model.py").write_text(
        "from cabal.rounds.simulated import simulated_team\n\n\ndef make():\n    return simulated_team(done_at_round=1)\n")
    mission = tmp_path / "near.mission.yaml"
    mission.write_text("request: Plan a picnic for ten.\nteam: {operatives: 1}\nrounds: 2\nmodel: py:team_model:make\n")

    result = run_mission(mission, home=graph_server.home)

    assert result.state == "done"
    with ContextGraph.open(name=result.mission_id, home=graph_server.home) as graph:
        assert graph.get(result.mission_id)["model"] == f"py:{tmp_path / 'team_model.py'}:make"


def test_the_guides_function_model_runs_a_mission(graph_server, tmp_path: Path) -> None:
    guide = (ROOT / "docs" / "guide" / "models.md").read_text()
    code = guide.split("```python\n")[1].split("```")[0]
    (tmp_path / "echo_model.py").write_text(code)
    mission = tmp_path / "echo.mission.yaml"
    mission.write_text("request: Plan a picnic for ten.\nteam: {operatives: 1}\nrounds: 1\n")

    result = run_mission(mission, model="py:echo_model:make", home=graph_server.home)

    assert (result.state, result.failed_turns) == ("done", 0)


def test_a_cost_budget_on_a_model_without_prices_is_said_once_to_be_unenforceable(ollama_api: FakeOllama,
                                                                                    graph_server) -> None:
    from cabal.rounds.events import Warned

    ollama_api.respond_with(ollama_script_responder(EXAMPLES["launch"][1]))
    spec = example("launch").model_copy(update={"budget": example("launch").budget.model_copy(
        update={"cost_usd": 1.0})})
    events: list = []

    result = run_mission(spec, model="ollama:qwen3:8b", home=graph_server.home, on_event=events.append)

    assert (result.state, result.cost_usd) == ("done", 0.0)
    assert [e.message for e in events if isinstance(e, Warned)] == [
        "no prices are known for qwen3:8b: the cost budget ($1.0) cannot be enforced; the token budget still is"]


def test_an_error_no_rule_names_from_inside_a_providers_sdk_pauses_the_mission_not_fails_it(
        openai_api: FakeOpenAI, graph_server, monkeypatch: pytest.MonkeyPatch) -> None:
    import openai

    from cabal.llm import make_model

    model = make_model("openai:gpt-4.1-mini")

    def broken(*args, **kwargs):
        raise openai.OpenAIError("the client cannot sign this request")

    monkeypatch.setattr(model.root_client.chat.completions, "create", broken)

    result = run_mission(example("launch"), model=model, home=graph_server.home)

    assert (result.state, result.round) == ("interrupted", 0)
    assert result.detail == "the model is unavailable: openai client failed: OpenAIError: the client cannot sign this request"
