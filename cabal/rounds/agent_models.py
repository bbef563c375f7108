"""Which model each agent calls: the mission file's ``model`` and ``models`` resolved per
agent (``MissionSpec.agent_model_settings``), each distinct model built once, picked at call
time by agent id; and a model moved to JSON answers when its provider refuses tools.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from cabal.llm import ModelSettings, make_model, model_name
from cabal.llm.json_answers import OUTPUT_JSON

OBJECT_PREFIX = "object:"  # the stored spec of a model passed in as an object (it cannot be rebuilt)


@dataclass(frozen=True)
class AgentModel:
    """The model one agent calls, with the settings it calls it with."""

    spec: str  # as stored for resuming (a script's path absolute; object:NAME for a model passed in)
    settings: ModelSettings
    model: Any

    @functools.cached_property  # an AgentModel is frozen: its model does not change
    def name(self) -> str:
        """The provider's name of the model: what prices are looked up by, and usage is grouped by."""
        return model_name(self.model)


class AgentModels:
    """The model of every agent of a mission. Thread-safe: a switch comes from a turn's thread."""

    def __init__(self, chosen: Mapping[str, AgentModel]) -> None:
        self._chosen = dict(chosen)
        self._lock = threading.Lock()

    def of(self, agent_id: str) -> AgentModel:
        with self._lock:
            return self._chosen[agent_id]

    def names(self) -> str:
        """The models' names, for a message about all of them (``a, b``)."""
        with self._lock:
            return ", ".join(sorted({chosen.name for chosen in self._chosen.values()}))

    def settings(self) -> dict[str, ModelSettings]:
        """Each agent's settings, as stored on the mission for resuming."""
        with self._lock:
            return {agent_id: chosen.settings for agent_id, chosen in self._chosen.items()}

    def rebuilt(self) -> AgentModels:
        """Every model built again from its settings, as a resume in a new process builds them
        (a script's cursor starts afresh); a model passed in as an object is kept."""
        with self._lock:
            chosen = dict(self._chosen)
        built: dict[str, Any] = {}
        fresh = {}
        for agent_id, current in chosen.items():
            if current.spec.startswith(OBJECT_PREFIX):
                fresh[agent_id] = current
                continue
            client = _client_key(current.settings)
            if client not in built:
                built[client] = make_model(current.spec, current.settings)
            fresh[agent_id] = replace(current, model=built[client])
        return AgentModels(fresh)

    def switch_to_json(self, agent_id: str) -> tuple[AgentModel, bool]:
        """``agent_id``'s model, and every agent's on the same spec, asked for JSON answers from
        now on. Returns the agent's model and whether this call switched it (only the first of
        several turns that met the refusal at once records it)."""
        with self._lock:
            refused = self._chosen[agent_id]
            if refused.settings.output == OUTPUT_JSON:
                return refused, False
            for other, chosen in self._chosen.items():
                if chosen.spec == refused.spec:
                    self._chosen[other] = replace(chosen, settings=chosen.settings.with_overrides(output=OUTPUT_JSON))
            return self._chosen[agent_id], True


def build_agent_models(settings: Mapping[str, ModelSettings], *, model: Any = None,
                       switched: Iterable[str] = ()) -> AgentModels:
    """The agents' models from their settings, each distinct one built once (agents on the same
    spec and client settings share one model). ``model``: one chat model object for every agent
    (its settings still apply). ``switched``: specs a provider refused tools for (json output)."""
    json_specs = set(switched)
    built: dict[str, Any] = {}
    chosen = {}
    for agent_id, agent_settings in settings.items():
        if model is not None:
            spec, chat_model = f"{OBJECT_PREFIX}{model_name(model)}", model
        else:
            spec = agent_settings.name
            client = _client_key(agent_settings)
            if client not in built:
                built[client] = make_model(spec, agent_settings)
            chat_model = built[client]
        if spec in json_specs:
            agent_settings = agent_settings.with_overrides(output=OUTPUT_JSON)
        chosen[agent_id] = AgentModel(spec, agent_settings, chat_model)
    return AgentModels(chosen)


def _client_key(settings: ModelSettings) -> str:
    """What a model's client is built from: agents whose settings differ only in how they are
    asked (output, retries) share one client."""
    return settings.model_dump_json(exclude={"output", "max_retries"})
