"""The provider registry and the one door (make_model): specs, their one-line refusals, keys
kept out of every message, and each provider's failures judged by one policy, seen through
the real clients against the fake OpenAI and Ollama servers."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from cabal.errors import ConfigError, ModelError
from cabal.llm import RetryPolicy, call_metadata, call_model, make_model
from cabal.llm.json_answers import first_json_object
from cabal.llm.models import redact_secrets, resolve
from cabal.llm.prices import database_price, price_of
from cabal.llm.providers import PROVIDERS, provider_of
from cabal.llm.usage import Usage

from .fake_ollama import FakeOllama
from .fake_openai import TEST_KEY as KEY
from .fake_openai import FakeOpenAI


TOOL = {"name": "write_answer", "description": "Submit the Write step's answer.",
        "input_schema": {"type": "object", "properties": {"versions": {"type": "array", "items": {"type": "object"}}},
                         "required": ["versions"]}}
ARGS = {"versions": [{"productId": "p1", "content": "A first version."}]}
PROMPT = [SystemMessage("You write."), HumanMessage("Write p1.")]
METADATA = call_metadata(round=1, step="write", agent="operative-1")


def ask(spec: str, retries: int = 0, notices: list | None = None):
    return call_model(make_model(spec), PROMPT, [TOOL], metadata=METADATA,
                      retry=RetryPolicy(max_retries=retries, initial_wait_s=0.01),
                      on_retry=notices.append if notices is not None else None)


# ----------------------------------------------------------------------------- specs


def test_specs_name_their_provider_and_keep_the_rest_whole() -> None:
    assert [(p.name, rest) for p, rest in map(resolve, [
        "ollama:qwen3:8b", "openai:gpt-4.1-mini", "claude-sonnet-4-6", "anthropic:claude-opus-4-1", "simulated",
        "google_genai:gemini-2.5-pro", "bedrock_converse:anthropic.claude-3-5-sonnet-20240620-v1:0"])] == [
        ("ollama", "qwen3:8b"), ("openai", "gpt-4.1-mini"), ("anthropic", "claude-sonnet-4-6"),
        ("anthropic", "claude-opus-4-1"), ("simulated", ""), ("google_genai", "gemini-2.5-pro"),
        ("bedrock_converse", "anthropic.claude-3-5-sonnet-20240620-v1:0")]


@pytest.mark.parametrize(("spec", "message"), [
    ("gpt-4o", "unknown model 'gpt-4o': did you mean `openai:gpt-4o`? (cabal models lists the providers)"),
    ("gemini-2.5-pro", "unknown model 'gemini-2.5-pro': did you mean `google_genai:gemini-2.5-pro`?"),
    ("claude-sonet-4", "unknown Claude model 'claude-sonet-4'; did you mean claude-sonnet-4-6, claude-sonnet-4-5, "
                       "claude-sonnet-4-0?"),
])
def test_a_bare_name_that_is_not_a_claude_model_says_what_was_meant(spec: str, message: str) -> None:
    with pytest.raises(ConfigError):  # the user's argument is wrong, nothing ran: a usage error
        make_model(spec)
    with pytest.raises(ModelError) as caught:
        make_model(spec)

    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


def test_an_unknown_provider_lists_the_known_ones_closest_first() -> None:
    with pytest.raises(ModelError) as caught:
        make_model("opnai:gpt-4o")

    known = str(caught.value).split("Known providers: ")[1].split(", ")
    assert known[:2] == ["openai", "azure_openai"]
    assert set(known) == set(PROVIDERS)


def test_a_missing_key_names_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)

    with pytest.raises(ModelError, match=r"^model 'gpt-4o' needs an OpenAI API key: set OPENAI_API_KEY$"):
        make_model("openai:gpt-4o")
    with pytest.raises(ConfigError):  # the user's environment is wrong, nothing ran: a usage error (exit 2)
        make_model("openai:gpt-4o")


def test_a_401_from_a_server_of_ones_own_sent_no_key_names_the_variable_to_set(
        openai_api: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")  # OPENAI_BASE_URL names the server: it is sent no key of the user's
    openai_api.reply_bad_key()

    with pytest.raises(ModelError) as caught:
        ask("openai:gpt-4.1-mini")

    assert (str(caught.value), caught.value.status, caught.value.transient) == (
        "openai returned 401: Incorrect API key provided. (the server wants a key and none is set: set "
        "OPENAI_API_KEY)", 401, False)


def test_a_missing_package_names_the_pip_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "test-google-key-0000")

    with pytest.raises(ConfigError) as caught:
        make_model("google_genai:gemini-2.5-pro")

    assert str(caught.value) == ("model 'google_genai:gemini-2.5-pro' needs the langchain-google-genai package: "
                                 "pip install 'cabal-agents[google]'")


def test_every_providers_key_is_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    secrets = {"OPENAI_API_KEY": "sk-openai-secret-1", "GOOGLE_API_KEY": "AIza-google-secret-2",
               "AWS_SECRET_ACCESS_KEY": "aws-secret-3", "MISTRAL_API_KEY": "mistral-secret-4",
               "GROQ_API_KEY": "gsk-groq-secret-5", "AZURE_OPENAI_API_KEY": "azure-secret-6",
               "ANTHROPIC_API_KEY": "sk-ant-secret-7"}
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)

    text = redact_secrets(" ".join(f"{name}={value}" for name, value in secrets.items()))

    assert text == " ".join(f"{name}=[redacted]" for name in secrets)


def test_a_model_of_a_known_class_from_a_factory_belongs_to_its_provider(openai_api: FakeOpenAI) -> None:
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(model="gpt-4o", base_url=openai_api.base_url, api_key=KEY, max_retries=0)

    assert provider_of(model.bind_tools([TOOL])) is PROVIDERS["openai"]
    assert provider_of(make_model("simulated")) is PROVIDERS["py"]


# ----------------------------------------------------------------------------- prices


def test_prices_come_from_the_price_database() -> None:
    sonnet = database_price("claude-sonnet-4-6", "anthropic")
    assert (sonnet.input_per_mtok, sonnet.output_per_mtok, sonnet.cached_input_per_mtok,
            sonnet.cache_write_per_mtok) == pytest.approx((3.0, 15.0, 0.3, 3.75))
    gpt = database_price("gpt-4.1-mini", "openai")
    assert (gpt.input_per_mtok, gpt.output_per_mtok) == pytest.approx((0.4, 1.6))
    usage = Usage(input_tokens=1_000_000, output_tokens=100_000, cache_read_tokens=500_000)
    assert usage.cost_usd("gpt-4.1-mini") == pytest.approx(0.5 * 0.4 + 0.5 * gpt.cached_input_per_mtok + 0.16)
    assert price_of("cabal-scripted").input_per_mtok == 0.0
    assert price_of("no-such-model-anywhere") is None


# ----------------------------------------------------------------------------- failures, OpenAI


def test_openai_reads_tool_calls_and_cached_tokens(openai_api: FakeOpenAI) -> None:
    openai_api.reply(200, {"object": "chat.completion",
                           "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                               "role": "assistant", "content": None, "tool_calls": [{
                                   "id": "call_1", "type": "function",
                                   "function": {"name": "write_answer", "arguments": json.dumps(ARGS)}}]}}],
                           "usage": {"prompt_tokens": 2048, "completion_tokens": 20, "total_tokens": 2068,
                                     "prompt_tokens_details": {"cached_tokens": 1920}}})

    reply = ask("openai:gpt-4.1-mini")

    assert reply.tool_calls == [{"name": "write_answer", "args": ARGS, "id": "call_1"}]
    assert reply.usage == Usage(input_tokens=2048, output_tokens=20, cache_read_tokens=1920, calls=1)
    assert "cache_control" not in json.dumps(openai_api.requests[0].body)


def test_openai_arguments_that_are_not_json_reach_the_engine_as_an_invalid_call(openai_api: FakeOpenAI) -> None:
    openai_api.reply_bad_arguments("write_answer", '{"versions": [')

    reply = ask("openai:gpt-4.1-mini")

    assert reply.tool_calls == []
    assert [(c["name"], c["args"], c["id"]) for c in reply.invalid_tool_calls] == [
        ("write_answer", '{"versions": [', "call_01")]


def test_openai_rate_limit_is_retried_after_the_servers_wait(openai_api: FakeOpenAI) -> None:
    openai_api.reply_rate_limited(retry_after=0.02)
    openai_api.reply_server_error(500)
    openai_api.reply_tool_call("write_answer", ARGS)
    notices: list = []

    reply = ask("openai:gpt-4.1-mini", retries=2, notices=notices)

    assert reply.tool_calls[0]["args"] == ARGS
    assert [(n.retry, n.reason) for n in notices] == [
        (1, "openai returned 429: Rate limit reached for requests"),
        (2, "openai returned 500: The server had an error while processing your request.")]
    assert notices[0].wait_s == 0.02


@pytest.mark.parametrize(("queue", "status", "message"), [
    (lambda api: api.reply_bad_key(), 401, "openai returned 401: Incorrect API key provided. (the key was refused)"),
    (lambda api: api.reply_error(404, "The model `gpt-9` does not exist"), 404,
     "openai returned 404: The model `gpt-9` does not exist (no such model)"),
    (lambda api: setattr(api, "refuse_tools", True), 400,
     "openai returned 400: registry.ollama.ai/library/gpt-4.1-mini does not support tools"),
])
def test_openai_refusals_are_permanent_and_say_what_the_server_said(openai_api: FakeOpenAI, queue, status: int,
                                                                     message: str) -> None:
    queue(openai_api)

    with pytest.raises(ModelError) as caught:
        ask("openai:gpt-4.1-mini", retries=3)

    assert (str(caught.value), caught.value.status, caught.value.transient, caught.value.provider) == (
        message, status, False, "openai")
    assert len(openai_api.requests) == 1  # not retried


def test_openai_without_a_server_is_a_transient_failure_without_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # the discard port: nothing listens

    with pytest.raises(ModelError) as caught:
        ask("openai:gpt-4.1-mini")

    assert caught.value.transient
    assert str(caught.value).startswith("cannot reach openai: http://127.0.0.1:9/v1/chat/completions")
    assert KEY not in str(caught.value)


def test_an_unclassified_error_from_inside_the_sdk_is_a_model_error_not_a_crash(openai_api: FakeOpenAI,
                                                                                 monkeypatch) -> None:
    import openai

    def broken(*args, **kwargs):
        raise openai.OpenAIError("the client is misconfigured")

    model = make_model("openai:gpt-4.1-mini")
    monkeypatch.setattr(model.root_client.chat.completions, "create", broken)

    with pytest.raises(ModelError) as caught:
        call_model(model, PROMPT, [TOOL], metadata=METADATA, retry=RetryPolicy(max_retries=2))

    assert (str(caught.value), caught.value.transient) == (
        "openai client failed: OpenAIError: the client is misconfigured", False)


# ----------------------------------------------------------------------------- failures, Ollama


def test_ollama_tool_calls_and_counts_come_from_its_stream(ollama_api: FakeOllama) -> None:
    ollama_api.reply_tool_call("write_answer", ARGS)

    reply = ask("ollama:qwen3:8b")

    assert [(c["name"], c["args"]) for c in reply.tool_calls] == [("write_answer", ARGS)]
    assert reply.usage.calls == 1 and reply.usage.input_tokens > 0 and reply.usage.output_tokens > 0
    body = ollama_api.requests[0].body
    assert (body["model"], body["stream"], "cache_control" in json.dumps(body)) == ("qwen3:8b", True, False)


def test_ollama_failures_follow_the_same_policy(ollama_api: FakeOllama) -> None:
    ollama_api.reply_error(503, "server busy")
    ollama_api.reply_tool_call("write_answer", ARGS)
    notices: list = []
    assert ask("ollama:qwen3:8b", retries=1, notices=notices).tool_calls[0]["args"] == ARGS
    assert [n.reason for n in notices] == ["ollama returned 503: server busy"]

    ollama_api.refuse_tools = True
    with pytest.raises(ModelError) as caught:
        ask("ollama:qwen3:8b", retries=2)
    assert (str(caught.value), caught.value.status, caught.value.transient) == (
        "ollama returned 400: registry.ollama.ai/library/qwen3:8b does not support tools", 400, False)


def test_ollama_without_a_server_is_a_transient_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_HOST", "http://127.0.0.1:9")

    with pytest.raises(ModelError) as caught:
        ask("ollama:qwen3:8b")

    assert caught.value.transient
    assert str(caught.value) == "cannot reach ollama: [Errno 111] Connection refused"


def test_a_fake_server_answers_a_request_without_tools_in_plain_text(ollama_api: FakeOllama,
                                                                      openai_api: FakeOpenAI) -> None:
    from .fake_ollama import ollama_script_responder
    from .fake_openai import openai_script_responder
    from .script_responder import Path

    script = Path(__file__).resolve().parents[2] / "examples" / "launch" / "launch.script.yaml"
    prompt = [SystemMessage("You are Ada (chair-1).\nYour step now: Bootstrap (round 0)"), HumanMessage("# Round 0\nGo.")]
    ollama_api.respond_with(ollama_script_responder(script))
    openai_api.respond_with(openai_script_responder(script))
    metadata = call_metadata(round=0, step="bootstrap", agent="chair-1")

    for spec in ("ollama:qwen3:8b", "openai:gpt-4.1-mini"):
        reply = call_model(make_model(spec), prompt, [], metadata=metadata)
        assert reply.tool_calls == []
        answer = first_json_object(reply.text)  # as a model asked for json answers writes it
        assert (answer["tool"], answer["args"]["type"]) == ("halt", "question")  # the script's first: the Chair asks


def test_traces_name_the_provider_a_model_was_built_for(openai_api: FakeOpenAI, ollama_api: FakeOllama) -> None:
    from cabal.rounds.tracing import provider_name

    make_model("openai:gpt-4.1-nano")
    make_model("ollama:llama3.2:1b")

    assert [provider_name(name) for name in ("gpt-4.1-nano", "llama3.2:1b", "claude-sonnet-4-6", "cabal-scripted")] \
        == ["openai", "ollama", "anthropic", "_OTHER"]


def test_the_web_form_takes_any_providers_model_but_no_script_or_code() -> None:
    from cabal.web.forms import checked_model

    assert [checked_model(spec) for spec in ("openai:gpt-4.1-mini", "ollama:qwen3:8b", "claude-sonnet-4-6",
                                             "simulated", "py:cabal.rounds.simulated:team")] == [
        "openai:gpt-4.1-mini", "ollama:qwen3:8b", "claude-sonnet-4-6", "simulated", "simulated"]
    for refused in ("scripted:/etc/passwd", "py:os:system", "scripted:../x.yaml"):
        with pytest.raises(ConfigError, match="cannot be chosen here"):
            checked_model(refused)
    with pytest.raises(ConfigError, match="^unknown model spec 'opnai:x'.*Known providers: openai, "):
        checked_model("opnai:x")


def test_a_batch_preloads_the_package_of_each_missions_provider() -> None:
    from cabal.llm.models import modules_to_preload

    assert [modules_to_preload(spec) for spec in ("openai:gpt-4o", "claude-sonnet-4-6", "ollama:qwen3:8b",
                                                  "py:tests.llm.factories:make", "py:/x/model.py:make", "simulated",
                                                  "scripted:x.yaml", "nonsense")] == [
        ["langchain_openai"], ["langchain_anthropic"], ["langchain_ollama"], ["tests.llm.factories"], [],
        ["cabal.rounds.simulated"], [], []]


def test_cabal_models_lists_the_providers_and_describes_one(capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    from cabal.cli import main

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    assert main(["models", "--json"]) == 0
    rows = {row["provider"]: row for row in json.loads(capsys.readouterr().out)}
    assert (rows["openai"]["installed"], rows["openai"]["key_set"]) == (True, True)
    assert (rows["google_genai"]["installed"], rows["google_genai"]["install"], rows["google_genai"]["key_set"]) == (
        False, "pip install 'cabal-agents[google]'", False)

    assert main(["models", "openai:gpt-4.1-mini", "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert (facts["provider"], facts["key"], facts["key_set"], facts["price_per_mtok"]["input_per_mtok"]) == (
        "openai", "OPENAI_API_KEY", True, pytest.approx(0.4))
    assert KEY not in json.dumps(facts)


def test_cabal_run_with_a_model_that_names_nothing_says_so_in_one_line_and_exits_2(tmp_path: Path) -> None:
    cabal = Path(sys.executable).with_name("cabal")
    mission = Path(__file__).resolve().parents[2] / "examples" / "launch" / "launch.mission.yaml"
    for spec, line in (("gpt-4o", "cabal: unknown model 'gpt-4o': did you mean `openai:gpt-4o`? (cabal models lists "
                                  "the providers)\n"),
                       ("opnai:gpt-4o", "cabal: unknown model spec 'opnai:gpt-4o'; expected PROVIDER:MODEL")):
        done = subprocess.run([str(cabal), "run", str(mission), "--model", spec, "--home", str(tmp_path), "--quiet"],
                              capture_output=True, text=True, timeout=60)
        assert (done.returncode, done.stdout) == (2, "")
        assert done.stderr.startswith(line) and done.stderr.count("\n") == 1


def models_lines(capsys) -> list[str]:
    from cabal.cli import main

    assert main(["models"]) == 0
    return capsys.readouterr().out.splitlines()


def test_cabal_models_lines_its_columns_up_and_says_ollama_is_ready_only_when_its_server_answers(
        capsys, monkeypatch: pytest.MonkeyPatch, ollama_api) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("AZURE_OPENAI_API_KEY", raising=False)

    lines = models_lines(capsys)

    # Columns as wide as their widest cell (google_anthropic_vertex, langchain-nvidia-ai-endpoints,
    # AZURE_OPENAI_API_KEY unset), two spaces apart.
    assert lines[:4] == [
        "provider                 package                        key                         ready",
        "anthropic                langchain-anthropic            ANTHROPIC_API_KEY unset     no: set ANTHROPIC_API_KEY",
        "openai                   langchain-openai               OPENAI_API_KEY set          yes",
        "ollama                   langchain-ollama               (none)                      yes"]
    assert {line.index(" no: ") if " no: " in line else line.index(" yes") for line in lines[1:-1]} == {83}
    assert ollama_api.requests[-1].path == "/api/version"

    with socket.socket() as silent:  # a port that takes the connection and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        monkeypatch.setenv("OLLAMA_HOST", url)
        started = time.monotonic()
        ollama = models_lines(capsys)[3]
        waited = time.monotonic() - started
    assert ollama == ("ollama                   langchain-ollama               (none)                      no: start Ollama "
                      f"(ollama serve): nothing answers at {url}")
    assert waited < 2  # the probe's half second, not a model call's timeout


def test_a_misspelt_bare_model_gets_the_provider_it_is_closest_to_cabals_own_included() -> None:
    from cabal.errors import UnknownModel

    for spec, hint in (("simulatd", "did you mean simulated?"), ("opneai", "did you mean openai:MODEL?"),
                       ("gpt-4o", "did you mean `openai:gpt-4o`?")):
        with pytest.raises(UnknownModel) as raised:
            resolve(spec)
        assert str(raised.value) == f"unknown model {spec!r}: {hint} (cabal models lists the providers)"


def test_the_web_rooms_form_offers_the_providers_cabal_models_finds_ready(monkeypatch: pytest.MonkeyPatch,
                                                                          ollama_api) -> None:
    from cabal.web.forms import form_launch, model_choices

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("MISTRAL_API_KEY", KEY)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    installed = PROVIDERS["mistralai"].installed

    assert model_choices() == ["simulated", "openai:gpt-4.1-mini", "ollama:qwen3:8b", *(["mistralai:"] if installed
                                                                                         else [])]
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    assert model_choices()[:2] == ["simulated", "claude-sonnet-4-6"]
    # A provider listed without a model: the name typed beside it completes the spec.
    assert form_launch({"request": "Plan a picnic.", "model": "mistralai:", "model_name": "mistral-large"}).model == (
        "mistralai:mistral-large")
