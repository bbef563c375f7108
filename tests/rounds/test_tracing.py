"""OpenTelemetry traces of a mission: the span tree, its GenAI attributes, and the OTEL_* switches."""

from __future__ import annotations

import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from cabal.errors import ConfigError
from cabal.rounds.api import run_mission
from cabal.rounds.tracing import SpanRecorder, recorder_from_environment

from .players import LAUNCH_MISSION, ScriptPlayer
from .test_cli import cabal, mission_id_of


@pytest.fixture(scope="module")
def home(graph_server) -> str:
    return str(graph_server.home)


def traced(home: str, model=None):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    result = run_mission(LAUNCH_MISSION, home=home, model=model, on_event=SpanRecorder(provider.get_tracer("test")))
    return result, exporter.get_finished_spans()


def test_a_mission_is_one_tree_of_round_step_turn_and_model_call_spans(home: str) -> None:
    result, spans = traced(home)

    names = Counter(span.name.split(" ")[0] for span in spans)
    assert names == {"invoke_workflow": 1, "round": 2, "step": 15, "invoke_agent": 19, "chat": 19}
    by_id = {span.context.span_id: span for span in spans}
    parent = {span.name: by_id[span.parent.span_id].name if span.parent else None for span in spans}
    (mission,) = [s for s in spans if s.name == "invoke_workflow launch-plan"]
    assert mission.parent is None and {s.context.trace_id for s in spans} == {mission.context.trace_id}
    assert parent["round 2"] == "invoke_workflow launch-plan"
    for span in spans:  # every span sits under the kind of span it belongs to
        expected = {"round": ("invoke_workflow",), "step": ("round", "invoke_workflow"), "invoke_agent": ("step",),
                    "chat": ("invoke_agent",)}.get(span.name.split(" ")[0])
        if expected:
            assert by_id[span.parent.span_id].name.split(" ")[0] in expected, span.name
        assert span.start_time <= span.end_time
    chats = [s for s in spans if s.name.startswith("chat")]
    assert {(s.attributes["gen_ai.operation.name"], s.attributes["gen_ai.provider.name"],
             s.attributes["gen_ai.request.model"]) for s in chats} == {("chat", "_OTHER", "cabal-scripted")}
    assert sum(s.attributes["gen_ai.usage.input_tokens"] for s in chats) == result.usage.input_tokens
    assert sum(s.attributes["gen_ai.usage.output_tokens"] for s in chats) == result.usage.output_tokens
    turns = [s for s in spans if s.name.startswith("invoke_agent")]
    assert sum(s.attributes["gen_ai.usage.input_tokens"] for s in turns) == result.usage.input_tokens
    assert Counter(s.attributes["gen_ai.agent.id"] for s in turns) == {
        "operative-1": 4, "operative-2": 5, "chair-1": 6, "envoy-1": 2, "watchdog-1": 2}
    assert {s.attributes["cabal.turn.outcome"] for s in turns} == {"final", "halt"}
    assert "cabal.cost_usd" in turns[0].attributes
    assert (mission.attributes["gen_ai.conversation.id"], mission.attributes["cabal.stop_reason"],
            mission.attributes["gen_ai.usage.input_tokens"]) == (result.mission_id, "concluded", result.usage.input_tokens)
    assert [event.name for event in mission.events] == ["halt", "answer", "presentation", "presentation"]  # a round each


def test_a_failed_turn_is_an_error_span(home: str) -> None:
    player = ScriptPlayer()
    wrong = player.script_answer((1, "presentation", "envoy-1"))
    wrong["messages"][2]["asAgent"] = "operative-3"
    player.inject[(1, "presentation", "envoy-1")] = [{"tool": "final_output", "args": wrong}] * 3

    _, spans = traced(home, model=player.model())

    (failed,) = [s for s in spans if s.status.status_code == StatusCode.ERROR]
    assert (failed.name, failed.attributes["cabal.turn.attempts"], failed.attributes["cabal.round"]) == (
        "invoke_agent envoy-1", 3, 1)
    assert failed.status.description.startswith("messages.2: asAgent 'operative-3' may not speak")
    assert len([s for s in spans if s.name.startswith("chat") and s.parent.span_id == failed.context.span_id]) == 3


def test_tracing_is_off_unless_the_environment_asks() -> None:
    assert recorder_from_environment({}) is None
    assert recorder_from_environment({"OTEL_TRACES_EXPORTER": "none"}) is None
    assert recorder_from_environment({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "console"}) is None
    assert isinstance(recorder_from_environment({"OTEL_TRACES_EXPORTER": "console"}), SpanRecorder)
    with pytest.raises(ConfigError, match="unknown exporter 'zipkin'; Cabal knows otlp, console, none"):
        recorder_from_environment({"OTEL_TRACES_EXPORTER": "zipkin"})
    with pytest.raises(ConfigError, match="OTLP protocol 'grpc' is not supported"):
        recorder_from_environment({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})


class Collector(BaseHTTPRequestHandler):
    """A stand-in OTLP/HTTP collector: keeps every span it is sent."""

    spans: list = []

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource in request.resource_spans:
            service = {a.key: a.value.string_value for a in resource.resource.attributes}["service.name"]
            for scope in resource.scope_spans:
                Collector.spans += [(self.path, service, span.name) for span in scope.spans]
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def test_cabal_run_exports_its_spans_to_the_otlp_endpoint_in_the_environment(home: str) -> None:
    server = HTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        result = cabal("run", str(LAUNCH_MISSION), "--home", home, "--quiet",
                       env={"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{server.server_port}",
                            "OTEL_SERVICE_NAME": "cabal-test"})
    finally:
        server.shutdown()

    assert result.returncode == 0, result.stderr
    mission_id_of(result.stdout)
    assert {(path, service) for path, service, _ in Collector.spans} == {("/v1/traces", "cabal-test")}
    names = Counter(name.split(" ")[0] for _, _, name in Collector.spans)
    assert names == {"invoke_workflow": 1, "round": 2, "step": 15, "invoke_agent": 19, "chat": 19}


def test_langchains_tracers_see_every_model_call_the_parallel_operatives_included(home: str) -> None:
    # LangSmith traces through LangChain's callback context; a turn in a worker thread must
    # carry it, or the operatives' calls fall out of the run's trace.
    from langchain_core.tracers.context import collect_runs

    with collect_runs() as collected:
        result = run_mission(LAUNCH_MISSION, home=home, rounds=1)

    calls = [run for run in collected.traced_runs if run.run_type == "llm"]
    assert len(calls) == result.usage.calls == 10
    assert Counter(run.metadata["cabal_agent"] for run in calls) == {
        "chair-1": 4, "operative-1": 2, "operative-2": 2, "watchdog-1": 1, "envoy-1": 1}
