"""One error taxonomy for Cabal.

Every error carries structured fields (not just a message) so callers, the CLI and the model
feedback loop can act on them. Two families matter most:

- ``AnswerRejected`` means "retry: tell the model what was wrong". It lists every problem at
  once so a retry fixes only what was wrong.
- everything else derived from ``CabalError`` means "fail: stop and report".

The CLI prints ``str(error)`` (and ``error.hint`` when present) and exits non-zero; it never
shows a traceback for a ``CabalError``.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass


class CabalError(Exception):
    """Base of every error Cabal raises on purpose."""

    hint: str | None = None

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if hint is not None:
            self.hint = hint


class ConfigError(CabalError):
    """A setting (environment variable, argument, mission file) is unusable."""


class ResourceNotFound(CabalError):
    """A named thing (protocol, skill, procedure, mission, session) does not exist.

    ``known`` lists what does, alphabetically, or with ``closest_first`` the names most like
    ``name`` first (a mistyped mission id finds its mission at the head of the list), at most
    ``CLOSEST_SHOWN`` of them."""

    CLOSEST_SHOWN = 10

    def __init__(self, kind: str, name: str, *, known: list[str] | None = None, closest_first: bool = False) -> None:
        self.kind = kind
        self.name = name
        self.known = known or []
        message = f"{kind} not found: {name!r}"
        if self.known:
            shown = closest(name, self.known)[: self.CLOSEST_SHOWN] if closest_first else sorted(self.known)
            more = len(self.known) - len(shown)
            message += f" (known: {', '.join(shown)}" + (f" and {more} more" if more else "") + ")"
        super().__init__(message)


def closest(name: str, known: list[str]) -> list[str]:
    """``known``, most similar to ``name`` first (ties in alphabetical order)."""
    wanted = name.casefold()
    return sorted(known, key=lambda k: (-difflib.SequenceMatcher(None, wanted, k.casefold()).ratio(), k))


# ---------------------------------------------------------------------------------- graph


class GraphError(CabalError):
    """Base of errors from the context graph."""


class GraphUnavailable(GraphError):
    """The FalkorDB server could not be reached or started."""

    def __init__(self, address: str, reason: str, *, hint: str | None = None) -> None:
        self.address = address
        self.reason = reason
        super().__init__(f"cannot reach the graph server at {address}: {reason}", hint=hint)


class SchemaError(GraphError):
    """A node or link does not fit the schema; raised before any query is sent."""

    def __init__(self, message: str, *, item: str | None = None, field: str | None = None) -> None:
        self.item = item
        self.field = field
        super().__init__(message)


class ClusterError(GraphError):
    """A cluster could not be committed as a whole (nothing was written)."""

    def __init__(self, message: str, *, missing_ids: list[str] | None = None) -> None:
        self.missing_ids = missing_ids or []
        super().__init__(message)


class NodeNotFound(GraphError):
    def __init__(self, node_id: str) -> None:
        self.node_id = node_id
        super().__init__(f"node not found: {node_id!r}")


# ------------------------------------------------------------------------------- membrane


@dataclass(frozen=True)
class ProtocolProblem:
    """One located problem in a protocol file."""

    file: str
    message: str
    step: str | None = None
    field: str | None = None
    line: int | None = None

    def __str__(self) -> str:
        where = self.file
        if self.line is not None:
            where += f":{self.line}"
        if self.step is not None:
            where += f" step {self.step!r}"
        if self.field is not None:
            where += f" field {self.field!r}"
        return f"{where}: {self.message}"


class ProtocolLoadError(ConfigError):
    """A protocol (or procedure, role card, skill, script) file is malformed. Lists every problem
    found. A file is wrong and nothing ran: a usage error (exit 2), like any unusable setting."""

    def __init__(self, problems: list[ProtocolProblem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class TemplateError(CabalError):
    """A template refers to something the context does not hold."""

    def __init__(self, template: str, key: str, reason: str) -> None:
        self.template = template
        self.key = key
        super().__init__(f"template {template!r}: {reason} ({key!r})")


class ProtocolRuntimeError(CabalError):
    """A protocol hit a state it cannot continue from (depth limit, missing dependency, ...)."""

    def __init__(self, message: str, *, protocol: str | None = None, step: str | None = None) -> None:
        self.protocol = protocol
        self.step = step
        super().__init__(message)


# ------------------------------------------------------------------------ answers (retry)


@dataclass(frozen=True)
class AnswerProblem:
    """One thing wrong with an answer, addressed by a path into it (``versions.0.productId``)."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class AnswerRejected(CabalError):
    """An answer failed validation. Control flow for "tell the model and retry", never a crash."""

    def __init__(self, problems: list[AnswerProblem]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(str(p) for p in self.problems) or "answer rejected")

    def feedback(self) -> str:
        """The text a model reads before it retries: every problem, one per line."""
        lines = [f"Your answer was rejected ({len(self.problems)} problem(s)); fix each:"]
        lines += [f"- {p}" for p in self.problems]
        return "\n".join(lines)


# --------------------------------------------------------------------------- models, runs


class ModelError(CabalError):
    """The model provider failed: a request it refused (bad request, auth, ...), or a transient
    failure (rate limit, overload, timeout, a dropped connection) that outlasted the retries.

    Either way the mission is not at fault: it pauses ``interrupted`` and can be resumed."""

    def __init__(self, message: str, *, status: int | None = None, provider: str | None = None,
                 transient: bool = False, retry_after_s: float | None = None) -> None:
        self.status = status
        self.provider = provider
        self.transient = transient
        self.retry_after_s = retry_after_s  # the wait the provider asked for before a retry, if it did
        super().__init__(message)


class UnknownModel(ModelError, ConfigError):
    """A model spec that names no model Cabal can build (an unknown provider, a mistyped Claude
    name, a bare name of another provider's): the user's argument is wrong and nothing ran, so
    the command exits as for any unusable setting (2), not as for a provider that failed."""


class MissingKey(ModelError, ConfigError):
    """A model's provider needs a key and its variable is not set: the user's environment is
    wrong and nothing ran, so the command exits as for any unusable setting (2)."""

    def __init__(self, model: str, label: str, variable: str, *, provider: str) -> None:
        self.variable = variable
        super().__init__(f"model {model!r} needs {label}: set {variable}", provider=provider)


class CallRefused(ModelError):
    """A limit shared beyond one mission (a batch's budget) refuses further model calls.

    Like a provider outage, it is not the mission's fault: the mission pauses ``interrupted``
    and goes on when it is resumed under a limit that allows it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason, provider="batch")


class ReplayMismatch(CabalError):
    """A replayed call finds no recorded answer: its messages or tools changed since the recording
    (strict replay), or the cassette has no call at its place.

    Neither a provider failure nor Cabal's: the run stops there (the mission is ``diverged``, exit
    status 1) and says where. The command line's hint gives the lenient replay's whole command."""

    hint = ("replay leniently to match calls by place only (--model 'replay:ID_OR_PATH?mode=lenient'), or record "
            "the mission again")

    def __init__(self, *, place: str, source: str, what: str, why: str, diff: str = "") -> None:
        self.place = place
        self.source = source
        self.what = what
        self.why = why
        self.diff = diff
        message = f"replay of {source}: at {place}, {what} {why}"
        super().__init__(message + (f":\n{diff}" if diff else ""))


class StepFailed(CabalError):
    """A round step could not get a valid answer within its retry budget."""

    def __init__(self, step: str, agent: str, reason: str) -> None:
        self.step = step
        self.agent = agent
        self.reason = reason
        super().__init__(f"{step} by {agent} failed: {reason}")


class MissionError(CabalError):
    """A mission cannot be started, resumed or answered in its current state."""


class MissionBusy(MissionError, ConfigError):
    """What was asked of a mission (removing it) is refused while another process runs it:
    nothing was done, and the command exits 2 like any argument that cannot be used as it stands."""

    def __init__(self, mission_id: str, doing: str) -> None:
        self.mission_id = mission_id
        super().__init__(f"cannot {doing} mission {mission_id}: it is running",
                         hint=f"stop it first (cabal stop {mission_id}), or wait for it to end")


class ToolServerUnavailable(ConfigError):
    """A tool server the mission file marks ``required`` cannot be reached: the mission refuses
    to start (or resume), before round 1 and before anything is written."""

    def __init__(self, server: str, reason: str) -> None:
        self.server = server
        self.reason = reason
        super().__init__(f"required tool server {server!r} is unavailable: {reason}",
                         hint="start it, fix its entry under tools:, or mark it required: false")


# ----------------------------------------------------------------------------- procedures


class ProcedureError(CabalError):
    """A procedure run cannot do what was asked in its current state (unknown step, closed run, ...)."""

    def __init__(self, message: str, *, run_id: str | None = None, step: str | None = None) -> None:
        self.run_id = run_id
        self.step = step
        super().__init__(message)


class TemplateWriteRefused(ProcedureError):
    """An agent tried to write into a procedure template, which is read-only once installed."""

    def __init__(self, run_id: str, actor_id: str, targets: list[str]) -> None:
        self.actor_id = actor_id
        self.targets = list(targets)
        super().__init__(
            f"run {run_id!r}: {actor_id!r} may not write into a procedure template "
            f"({', '.join(self.targets)}); write into the run space instead; nothing was written",
            run_id=run_id,
        )
