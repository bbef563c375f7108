"""The baseline: what one call of a model makes of a mission file, stored like a mission.

``cabal baseline MISSION_FILE`` gives one agent the mission's model, the request, the user's
``answers:``, the sources whole (quoted as Bootstrap quotes them, with the same ids to cite) and
the mission's tools (a short loop, ``MAX_TOOL_CALLS`` calls at most); it writes every deliverable
the request names as a separate document, in one answer. Nothing is written until that answer
is valid (``MAX_ANSWERS`` answers at most, each refused one sent back with all its problems);
then one write stores a mission of kind ``baseline`` (the user's sources, the turn with its
usage, each tool call, one product and version per document) and a second accepts every
document and ends the mission (an update needs its node written before it). So
``cabal show``, ``export``, ``missions``, ``rm``, ``cost`` and ``judge`` read it as they read a
team's mission. Its calls are recorded in its cassette like every call, so
``--model replay:...`` runs it again offline.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cabal.entities import TITLE_MAX_CHARS, VERSION_CONTENT_MIN_CHARS, Acceptance, AddProduct, VersionWrite
from cabal.errors import AnswerProblem, MissionError
from cabal.llm import call_metadata, make_model, model_name
from cabal.llm.answering import Answered, ask_until_valid
from cabal.llm.prices import price_of
from cabal.llm.usage import Usage
from cabal.llm.cassette import CASSETTE_FILE, recording
from cabal.membrane import Cluster, Membrane
from cabal.refs import find_malformed, parse_refs, replace_refs
from cabal.resources import builtin_dir
from cabal.rounds.api import (_loaded, _new_mission_id, _sources_of, _tool_host, _with_paths_anchored,
                              resolved_settings)
from cabal.rounds.control import MissionResult, status_of
from cabal.rounds.facts import BaselineFacts
from cabal.rounds.facts import Source as SourceFact
from cabal.rounds.mission import MissionSpec
from cabal.rounds.sources import ingest_clusters, whole_source
from cabal.rounds.ids import item_id, tool_call_id, turn_id
from cabal.rounds.tooluse import shown_arguments, tool_message, why_of
from cabal.rounds.workspace import Workspace
from cabal.sources import CITED_ID, Collected, chunk_node_id, source_node_id
from cabal.tools.host import ToolHost, ToolOutcome, kept_outcome
from cabal.tools.spec import SEPARATOR
from cabal.vocabulary import MissionKind, MissionState, Role, Step, StopReason
from cabal.yaml_reader import read_text_file

BASELINE_STEP = "baseline"  # the call key's step, and the turn's
WRITER = "operative-1"  # the one agent: an operative, so every reader of a mission knows its part
ROUND = 1
MAX_TOOL_CALLS = 6
MAX_ANSWERS = 3
MAX_DOCUMENTS = 12
FINAL_OUTPUT = "final_output"
PROMPT_FILE = "baseline.md"


class BaselineDocument(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=TITLE_MAX_CHARS,
                      description="The deliverable's name, as the request names it")
    content: str = Field(min_length=VERSION_CONTENT_MIN_CHARS,
                         description="The whole document in Markdown, as its readers get it")


class BaselineAnswer(BaseModel):
    """Every document the request asks for, in one answer."""

    model_config = ConfigDict(extra="forbid")

    documents: list[BaselineDocument] = Field(min_length=1, max_length=MAX_DOCUMENTS)


ANSWER_TOOL = {"name": FINAL_OUTPUT, "description": "Your answer: every document the request asks for.",
               "input_schema": BaselineAnswer.model_json_schema()}


def run_baseline(mission: str | Path | MissionSpec | dict, *, model: Any = None, home: str | Path | None = None,
                 url: str | None = None, record: bool = True, workspace: Workspace | None = None,
                 mission_id: str | None = None, on_reply: Callable[[Any], None] | None = None) -> MissionResult:
    """One call of the mission's model (or ``model``: a spec or a chat model object) writes every
    deliverable; the result is stored as a mission of kind ``baseline`` (see the module)."""
    spec, base = _loaded(mission)
    workspace = workspace or Workspace.at(home, url)
    collected = _sources_of(spec, base, None, workspace)  # the team's sources, its memory among them
    spec = _with_paths_anchored(spec, base)
    chat, model_spec = _model(spec, model, base, workspace)
    mission_id = mission_id or _new_mission_id(spec.model_copy(update={"name": f"{spec.name or 'mission'}-baseline"}))
    graph = workspace.graph(mission_id)
    try:
        if graph.exists(mission_id):
            raise MissionError(f"mission {mission_id} already exists")
        with workspace.driving(mission_id), _tool_host(workspace, mission_id, spec).start() as host:
            folder = workspace.mission_dir(mission_id)
            try:
                with recording(folder / CASSETTE_FILE, record):
                    asked = _ask(chat, spec, collected, host, on_reply)
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)  # nothing was written: no baseline, no folder
                raise
            membrane = Membrane(graph, protocol_dirs=workspace.extra_dirs.get("protocols", []))
            membrane.commit(_clusters(membrane, mission_id, spec, model_spec, collected, asked, model_name(chat)))
            membrane.commit(_accepted(membrane, mission_id, len(asked.documents)))
        return status_of(workspace, graph, mission_id)
    finally:
        graph.close()


def _model(spec: MissionSpec, model: Any, base: Path | None, workspace: Workspace) -> tuple[Any, str]:
    """The chat model the baseline calls and the spec stored for it (``object:NAME`` for one passed in)."""
    if model is not None and not isinstance(model, str):
        return model, f"object:{model_name(model)}"
    settings = resolved_settings(spec.model_settings(), {"name": model} if model else {}, base, workspace.home)
    return make_model(settings.name, settings), settings.name


# ------------------------------------------------------------------------------ the call


def prompt(spec: MissionSpec, collected: Collected | None) -> tuple[list[Any], BaselineFacts]:
    """The call's messages and the facts they show: the instructions, then the request, the
    user's answers and the sources whole."""
    read = collected.read if collected is not None else ()
    parts = ["## The user's request", spec.request.strip()]
    if spec.answers:
        parts += ["", "## What the user told you (answers to questions, before the work started)",
                  *(f"- {answer}" for answer in spec.answers)]
    if read:
        parts += ["", "## The user's files, whole (cite them as [[s:s1]] or a section as [[s:s1#2]])"]
        parts += [f"### {whole_source(f's{number}', text)}" for number, text in enumerate(read, 1)]
    system = read_text_file(builtin_dir("prompts") / PROMPT_FILE)
    facts = BaselineFacts(
        request=spec.request, answers=tuple(spec.answers),
        sources=tuple(SourceFact(f"s{n}", t.name, t.note or "", len(t.chunks), t.first_heading)
                      for n, t in enumerate(read, 1)))
    return [SystemMessage(system), HumanMessage("\n".join(parts))], facts


@dataclass(frozen=True)
class _Asked:
    """The valid answer, what the tools answered (in call order), each call's usage."""

    answered: Answered[BaselineAnswer]
    outcomes: list[ToolOutcome]
    calls: list[Usage]

    @property
    def documents(self) -> list[BaselineDocument]:
        assert self.answered.value is not None, "only a valid answer is kept"
        return self.answered.value.documents


def _ask(chat: Any, spec: MissionSpec, collected: Collected | None, host: ToolHost,
         on_reply: Callable[[Any], None] | None) -> _Asked:
    messages, facts = prompt(spec, collected)
    offered = _offered(host)
    outcomes: list[ToolOutcome] = []
    calls: list[Usage] = []

    def side(name: str, arguments: dict[str, Any]) -> str:
        outcome = (host.call(name, arguments, round_number=ROUND) if name in {tool.name for tool in offered}
                   else kept_outcome(f"no tool {name!r} is offered", ok=False))
        outcomes.append(outcome)
        return tool_message(name, outcome, tool_call_id(_turn_id(), len(outcomes)))

    def replied(reply: Any) -> None:
        calls.append(reply.usage)
        if on_reply is not None:
            on_reply(reply)

    sections = {f"s{n}": len(t.chunks) for n, t in enumerate(collected.read if collected else (), 1)}
    answered = ask_until_valid(
        chat, messages, ANSWER_TOOL, lambda args: _read(args, sections, _answered(outcomes)),
        metadata=call_metadata(round=ROUND, step=BASELINE_STEP, agent=WRITER, facts=facts),
        max_answers=MAX_ANSWERS, side_tools=[tool.definition() for tool in offered], side=side if offered else None,
        max_side_calls=MAX_TOOL_CALLS, on_reply=replied)
    if answered.value is None:
        raise MissionError(f"the baseline's model gave no valid answer in {MAX_ANSWERS} tries: "
                           + "; ".join(map(str, answered.problems)))
    return _Asked(answered, outcomes, calls)


def _offered(host: ToolHost) -> list[Any]:
    """The tools the mission offers a writer (an operative, in the Write step): the baseline's
    one writer gets what the team's writers get."""
    return host.tools_for(WRITER, Role.OPERATIVE, Step.WRITE)


def _answered(outcomes: list[ToolOutcome]) -> set[str]:
    """The ids of the calls a tool answered so far: the results a document may cite."""
    return {tool_call_id(_turn_id(), index) for index, outcome in enumerate(outcomes, 1) if outcome.ok}


def _read(arguments: dict[str, Any], sections: dict[str, int],
          calls: set[str]) -> tuple[BaselineAnswer | None, list[AnswerProblem]]:
    """The answer, or every problem with it: its shape, names twice, references that name nothing
    (``calls``: the tool results it may cite)."""
    from cabal.membrane.validation import pydantic_problems

    try:
        answer = BaselineAnswer.model_validate(arguments)
    except ValidationError as error:
        return None, pydantic_problems(error)
    problems: list[AnswerProblem] = []
    seen: set[str] = set()
    for index, document in enumerate(answer.documents):
        where = f"documents.{index}"
        if document.name.strip().casefold() in seen:
            problems.append(AnswerProblem(f"{where}.name", f"two documents are named {document.name!r}"))
        seen.add(document.name.strip().casefold())
        for span in find_malformed(document.content):
            problems.append(AnswerProblem(f"{where}.content", f"{span} is not a citation: write [[s:s1]] or [[s:s1#2]]"))
        for ref in parse_refs(document.content):
            cited = CITED_ID.match(ref.id) if ref.kind == "s" else None
            if ref.kind == "s" and ref.id in calls:
                continue
            if cited is None or cited[1] not in sections or int(cited[2] or 0) > sections[cited[1]]:
                known = ", ".join(f"{s} (sections 1-{n})" for s, n in sections.items()) or "none"
                problems.append(AnswerProblem(f"{where}.content", f"[[{ref.kind}:{ref.id}]] names no file or section "
                                                                  f"of the user's (files: {known}), nor a tool result "
                                                                  "(cited by the id its result gave)"))
    return (answer if not problems else None), problems


# ----------------------------------------------------------------------------- the write


def _clusters(membrane: Membrane, mission_id: str, spec: MissionSpec, model_spec: str, collected: Collected | None,
              asked: _Asked, name: str) -> list[Cluster]:
    """Everything the baseline stores, as one write."""
    turn, context = _turn(mission_id)
    usage = asked.answered.usage
    clusters = [membrane.prepare("start_mission", {
        "mission_id": mission_id, "kind": MissionKind.BASELINE, "name": f"{spec.name or mission_id} (baseline)",
        "request": spec.request, "rounds": 1, "spec": spec.model_dump_json(), "model": model_spec,
        "model_settings": spec.model_settings().model_dump_json(), "agent_models": json.dumps({}),
        "agents": [{"id": WRITER, "role": Role.OPERATIVE, "name": "one call", "skills": [],
                    "persona": "one call of the model writes every document alone"}],
        "budget_tokens": None, "budget_cost_usd": None}, {}, session_id=f"{mission_id}.start")]
    clusters += ingest_clusters(membrane, mission_id, collected) if collected else []
    for index, ((tool, arguments, _), outcome) in enumerate(zip(asked.answered.side_calls, asked.outcomes), 1):
        server, _, short = tool.partition(SEPARATOR)
        clusters.append(membrane.prepare("record_tool_call", {
            **context, "call_id": tool_call_id(turn, index), "server": server, "tool": short,
            "arguments": shown_arguments(arguments), "why": why_of(arguments, ""),
            "outcome": "ok" if outcome.ok else "error", "digest": outcome.digest, "result": outcome.text,
        }, {}, session_id=f"{turn}.tool{index}.record"))
    for index, document in enumerate(asked.documents):
        product_id, version_id = _document_ids(turn, index)
        content = replace_refs(document.content, _stored_citation)
        clusters.append(membrane.prepare("tree_operation", {
            **context, "action": "ADD", "owner": WRITER, "product_id": product_id},
            {"add": AddProduct(action="ADD", new_id=f"new-{index + 1}", parent_id=mission_id, product={
                "name": document.name.strip(), "type": "Content",
                "dod": "What the request asks of this document, written in one answer."})},
            session_id=f"{product_id}.add"))
        clusters.append(membrane.prepare("write_version", {
            **context, "item_id": version_id, "number": 1, "previous_version_id": None, "references": [],
            "cited": sorted({ref.id for ref in parse_refs(content) if ref.kind == "s"})},
            {"item": VersionWrite(product_id=product_id, new_version={
                "content_title": document.name.strip(), "content": content,
                "change_summary": "The first and only version, written in one answer."})},
            session_id=version_id))
    clusters.append(membrane.prepare("record_turn", {
        **context, "outcome": "ok", "prose": f"wrote {len(asked.documents)} document(s) in one answer",
        "reasoning": "", "attempts": asked.answered.rejected + 1, "problems": [], "model": name,
        "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
        "cache_read_tokens": usage.cache_read_tokens, "cost_usd": round(usage.cost_usd(name), 6),
        "priced": price_of(name) is not None,
        "calls": {"input_tokens": [c.input_tokens for c in asked.calls],
                  "output_tokens": [c.output_tokens for c in asked.calls],
                  "cache_read_tokens": [c.cache_read_tokens for c in asked.calls]}}, {}, session_id=f"{turn}.record"))
    return clusters


def _accepted(membrane: Membrane, mission_id: str, documents: int) -> list[Cluster]:
    """The second write: every document accepted, the mission done (an update needs its node
    written first)."""
    turn, context = _turn(mission_id)
    clusters = []
    for index in range(documents):
        product_id, version_id = _document_ids(turn, index)
        clusters.append(membrane.prepare("decide_acceptance", {
            **context, "item_id": f"{turn}.decide_acceptance{index}", "decision": "accepted",
            "version_id": version_id}, {"item": Acceptance(product_id=product_id, accepted=True, version_id=version_id)},
            session_id=f"{turn}.decide_acceptance{index}"))
    clusters.append(membrane.prepare("mission_status", {
        "mission_id": mission_id, "actor_id": WRITER, "status": MissionState.DONE, "round": ROUND,
        "stop_reason": StopReason.CONCLUDED,
        "detail": "one call wrote every document", "budget_tokens": None, "budget_cost_usd": None},
        {}, session_id=f"status.done.r{ROUND}"))
    return clusters


def _turn_id() -> str:
    return turn_id(ROUND, BASELINE_STEP, WRITER)


def _turn(mission_id: str) -> tuple[str, dict[str, Any]]:
    """The baseline's one turn: its id, and the context every protocol run of it takes."""
    turn = _turn_id()
    return turn, {"mission_id": mission_id, "round": ROUND, "step": BASELINE_STEP, "agent_id": WRITER,
                  "actor_id": WRITER, "turn_id": turn}


def _document_ids(turn: str, index: int) -> tuple[str, str]:
    """The product and the version of the ``index``-th document (as the engine names a turn's items)."""
    return item_id(turn, "product", index), item_id(turn, "write_version", index)


def _stored_citation(ref: Any) -> str:
    """A citation as the graph keeps it (``s2#3``: the section node of the source's first version;
    a tool result by its call's id, as cited)."""
    cited = CITED_ID.match(ref.id) if ref.kind == "s" else None
    if cited is None:  # another kind, or a tool result (checked by _read)
        return str(ref.id)
    node = source_node_id(cited[1], 1)
    return chunk_node_id(node, int(cited[2])) if cited[2] else node

