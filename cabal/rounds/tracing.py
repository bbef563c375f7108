"""OpenTelemetry traces of missions, made from the run's events.

One span for the mission's run in this process, one a round, a step, an agent's turn and a model
call, nested in that order, with token usage and cost as attributes named after the GenAI
semantic conventions (``gen_ai.*``; cost, which they do not name, is ``cabal.cost_usd``). The
spans are drawn from the events of ``cabal.rounds.events`` with the times the events carry, so
tracing is one more listener of a run and the engine knows nothing of it.

Off unless asked. The standard variables ask: ``OTEL_TRACES_EXPORTER`` (``otlp``, ``console``;
``none`` turns it off) or an OTLP endpoint (``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``), plus the exporter's own variables (headers, protocol,
``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``); ``OTEL_SDK_DISABLED=true`` wins. An
application that set its own tracer provider gets the spans there. The SDK and the OTLP
exporter come with ``pip install 'cabal-agents[otel]'``; nothing here imports them unless asked.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from collections.abc import Mapping
from typing import Any

from cabal.errors import ConfigError
from cabal.rounds.events import (
    Answered, HaltRaised, MissionEvent, MissionResumed, MissionStarted, MissionStopped, ModelCalled, Presented,
    RoundStarted, RunEnded, StepStarted, ToolReturned, TurnDone, TurnStarted, UserMessage,
)
from cabal.vocabulary import StopReason, TurnOutcome, install_command

TRACER_NAME = "cabal"
EXPORTERS = ("otlp", "console", "none")
_PROVIDERS: dict[tuple[str, ...], Any] = {}  # the providers built from the environment, one per set of exporters
_BUILDING = threading.Lock()


def recorder_from_environment(environ: Mapping[str, str] | None = None) -> SpanRecorder | None:
    """A listener that records a run as spans, if the environment (or the application) asks for
    traces; None otherwise, and then nothing of OpenTelemetry is imported."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    provider = _provider_from(env)
    if provider is None:
        return None
    from cabal.vocabulary import CABAL_VERSION

    return SpanRecorder(provider.get_tracer(TRACER_NAME, CABAL_VERSION))


def _provider_from(env: Mapping[str, str]) -> Any:
    exporters = tuple(name.strip().lower() for name in env.get("OTEL_TRACES_EXPORTER", "").split(",") if name.strip())
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if not exporters:
        if not endpoint:
            return _application_provider()
        exporters = ("otlp",)
    unknown = [name for name in exporters if name not in EXPORTERS]
    if unknown:
        raise ConfigError(f"OTEL_TRACES_EXPORTER: unknown exporter {unknown[0]!r}; Cabal knows {', '.join(EXPORTERS)}")
    if "none" in exporters:
        return None
    with _BUILDING:
        if exporters not in _PROVIDERS:
            _PROVIDERS[exporters] = _build_provider(exporters, env)
        return _PROVIDERS[exporters]


def _application_provider() -> Any:
    """The SDK provider the application set, if it set one (then its module is imported already)."""
    if "opentelemetry.trace" not in sys.modules:
        return None
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    return None if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)) else provider


def _build_provider(exporters: tuple[str, ...], env: Mapping[str, str]) -> Any:
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    except ImportError:
        raise ConfigError(f"OTEL_TRACES_EXPORTER asks for traces ({', '.join(exporters)}) but OpenTelemetry's SDK "
                          "is not installed", hint=install_command("otel")) from None
    attributes = {} if env.get("OTEL_SERVICE_NAME") else {"service.name": TRACER_NAME}
    provider = TracerProvider(resource=Resource.create(attributes))  # adds OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME
    for name in exporters:
        exporter = ConsoleSpanExporter(out=sys.stderr) if name == "console" else _otlp_exporter(env)
        provider.add_span_processor(BatchSpanProcessor(exporter))
    atexit.register(provider.shutdown)  # exports what is left before the process ends
    return provider


def _otlp_exporter(env: Mapping[str, str]) -> Any:
    protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf"
    if protocol != "http/protobuf":
        raise ConfigError(f"OTLP protocol {protocol!r} is not supported; Cabal exports traces over http/protobuf",
                          hint="set OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf (port 4318 on most collectors)")
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        raise ConfigError("traces go to OTLP but its exporter is not installed", hint=install_command("otel")) from None
    return OTLPSpanExporter()  # reads its endpoint, headers, timeout and compression from the environment


# ------------------------------------------------------------------------------- the spans


def provider_name(model: str) -> str:
    """``gen_ai.provider.name`` for a model name (the conventions' ``_OTHER`` when unknown)."""
    from cabal.llm.providers import provider_named

    provider = provider_named(model)
    return provider.system if provider is not None else "_OTHER"


def _ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)


class SpanRecorder:
    """A run listener that turns events into spans on ``tracer``; give it to ``run_mission``'s
    ``on_event`` to trace with a tracer of your own."""

    def __init__(self, tracer: Any) -> None:
        from opentelemetry import trace  # the API only: a dependency of the SDK

        self._trace = trace
        self._tracer = tracer
        self._lock = threading.Lock()
        self._mission: Any = None
        self._round: Any = None
        self._step: Any = None
        self._turns: dict[str, Any] = {}
        atexit.register(self._abandon)

    def __call__(self, event: MissionEvent) -> None:
        with self._lock:
            self._record(event)

    def _start(self, name: str, parent: Any, at: float, attributes: dict[str, Any]) -> Any:
        context = self._trace.set_span_in_context(parent) if parent is not None else None
        return self._tracer.start_span(name, context=context, start_time=_ns(at), attributes=attributes)

    def _record(self, event: MissionEvent) -> None:  # noqa: C901 - one branch per kind of event
        if isinstance(event, (MissionStarted, MissionResumed)):
            self._mission = self._start(f"invoke_workflow {event.name}", None, event.at, {
                "gen_ai.operation.name": "invoke_workflow", "gen_ai.conversation.id": event.mission,
                "cabal.mission.id": event.mission, "cabal.mission.name": event.name, "cabal.model": event.model,
                "cabal.resumed": isinstance(event, MissionResumed)})
        elif isinstance(event, RoundStarted):
            self._end_step(event.at)
            self._end_round(event.at)
            self._round = self._start(f"round {event.round}", self._mission, event.at, {"cabal.round": event.round})
        elif isinstance(event, StepStarted):
            self._end_step(event.at)
            self._step = self._start(f"step {event.step}", self._round or self._mission, event.at,
                                     {"cabal.round": event.round, "cabal.step": str(event.step)})
        elif isinstance(event, TurnStarted):
            self._turns[event.agent] = self._start(f"invoke_agent {event.agent}", self._step or self._mission, event.at, {
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.id": event.agent, "gen_ai.agent.name": event.agent,
                "cabal.round": event.round, "cabal.step": str(event.step)})
        elif isinstance(event, ModelCalled):
            span = self._start(f"chat {event.model}", self._turns.get(event.agent) or self._step, event.at - event.duration_s, {
                "gen_ai.operation.name": "chat", "gen_ai.provider.name": provider_name(event.model),
                "gen_ai.request.model": event.model, "gen_ai.agent.id": event.agent,
                "gen_ai.usage.input_tokens": event.input_tokens, "gen_ai.usage.output_tokens": event.output_tokens,
                "gen_ai.usage.cache_read.input_tokens": event.cache_read_tokens,
                "gen_ai.usage.cache_creation.input_tokens": event.cache_write_tokens,
                "cabal.cost_usd": event.cost_usd, "cabal.call": event.call})
            span.end(end_time=_ns(event.at))
        elif isinstance(event, ToolReturned):  # the tool's answer is data: its name and outcome only
            span = self._start(f"execute_tool {event.tool}", self._turns.get(event.agent) or self._step,
                               event.at - event.duration_s, {
                                   "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": event.tool,
                                   "gen_ai.agent.id": event.agent, "cabal.round": event.round,
                                   "cabal.step": str(event.step), "cabal.tool.ok": event.ok})
            if not event.ok:
                span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, "the agent was given the tool's error"))
            span.end(end_time=_ns(event.at))
        elif isinstance(event, TurnDone):
            span = self._turns.pop(event.agent, None)
            if span is not None:
                span.set_attributes({
                    "gen_ai.usage.input_tokens": event.input_tokens, "gen_ai.usage.output_tokens": event.output_tokens,
                    "gen_ai.usage.cache_read.input_tokens": event.cache_read_tokens, "cabal.cost_usd": event.cost_usd,
                    "cabal.turn.outcome": str(event.outcome), "cabal.turn.attempts": event.attempts,
                    "cabal.turn.calls": event.calls})
                if event.outcome == TurnOutcome.FAILED:
                    span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, "; ".join(event.problems)[:500]))
                span.end(end_time=_ns(event.at))
        elif isinstance(event, (HaltRaised, Answered, UserMessage, Presented)) and self._mission is not None:
            self._mission.add_event(event.kind, {"cabal.round": event.round}, timestamp=_ns(event.at))
        elif isinstance(event, MissionStopped) and self._mission is not None:
            self._mission.set_attributes({"cabal.stop_reason": str(event.reason), "cabal.round": event.round})
            if event.reason == StopReason.ERROR:
                self._mission.set_status(self._trace.Status(self._trace.StatusCode.ERROR, event.detail or "error"))
        elif isinstance(event, RunEnded) and self._mission is not None:
            self._mission.set_attributes({
                "cabal.mission.state": str(event.state), "cabal.turns": event.turns,
                "gen_ai.usage.input_tokens": event.input_tokens, "gen_ai.usage.output_tokens": event.output_tokens,
                "gen_ai.usage.cache_read.input_tokens": event.cache_read_tokens, "cabal.cost_usd": event.cost_usd})
            self._end_all(event.at)
            atexit.unregister(self._abandon)

    def _end_step(self, at: float) -> None:
        if self._step is not None:
            self._step.end(end_time=_ns(at))
            self._step = None

    def _end_round(self, at: float) -> None:
        if self._round is not None:
            self._round.end(end_time=_ns(at))
            self._round = None

    def _end_all(self, at: float) -> None:
        for span in self._turns.values():
            span.end(end_time=_ns(at))
        self._turns.clear()
        self._end_step(at)
        self._end_round(at)
        if self._mission is not None:
            self._mission.end(end_time=_ns(at))
            self._mission = None

    def _abandon(self) -> None:
        """At exit, a run that never ended (killed by an exception): end its spans as errors."""
        import time

        with self._lock:
            if self._mission is not None:
                self._mission.set_status(self._trace.Status(self._trace.StatusCode.ERROR, "the run ended without run_end"))
            self._end_all(time.time())
