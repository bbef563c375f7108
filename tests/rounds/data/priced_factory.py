"""Scripted models that go by a priced model's name, so that a mission with a model per role has
a cost per model to count (a fake model's own name, cabal-scripted, costs nothing).

`py:tests.rounds.data.priced_factory:opus` and `...:haiku` answer from the launch example's
script under the names claude-opus-4-1 and claude-haiku-4-5 (`...:opus_question`: from
question.script.yaml). Every model built is kept in ``BUILT`` by that name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cabal.llm import ScriptedChatModel

LAUNCH_SCRIPT = Path(__file__).resolve().parents[3] / "examples" / "launch" / "launch.script.yaml"
QUESTION_SCRIPT = Path(__file__).resolve().parent / "question.script.yaml"
BUILT: dict[str, list[ScriptedChatModel]] = {}


class PricedScript(ScriptedChatModel):
    model: str  # what model_name() reads, and prices are looked up by


def opus(**options: Any) -> ScriptedChatModel:
    return _built("claude-opus-4-1", options)


def haiku(**options: Any) -> ScriptedChatModel:
    return _built("claude-haiku-4-5", options)


def opus_question(**options: Any) -> ScriptedChatModel:
    return _built("claude-opus-4-1", options, QUESTION_SCRIPT)


def _built(name: str, options: dict[str, Any], script: Path = LAUNCH_SCRIPT) -> ScriptedChatModel:
    model = PricedScript.from_file(script, model=name, **options)
    BUILT.setdefault(name, []).append(model)
    return model
