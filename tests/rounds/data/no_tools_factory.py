"""A scripted model behind a provider that refuses tools, as Ollama does for a model without
tool support: a call that offers tools fails with the HTTP 400 Ollama sends; a call without
tools answers from the script in JSON text (as every scripted model does).

`--model py:tests.rounds.data.no_tools_factory:question_model` answers from question.script.yaml
(`launch_model`: the launch example's script). Every model built is kept in ``BUILT``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cabal.errors import ModelError
from cabal.llm import ScriptedChatModel

HERE = Path(__file__).resolve().parent
REFUSAL = "registry.ollama.ai/library/gemma:2b does not support tools"
BUILT: list[ScriptedChatModel] = []


class NoToolsModel(ScriptedChatModel):
    def _reply(self, call: Any, tools: list[Any]) -> Any:
        if tools:
            raise ModelError(f"ollama returned 400: {REFUSAL}", status=400, provider="ollama")
        return super()._reply(call, tools)


def question_model(**options: Any) -> ScriptedChatModel:
    return _built(HERE / "question.script.yaml", options)


def launch_model(**options: Any) -> ScriptedChatModel:
    return _built(HERE.parents[2] / "examples" / "launch" / "launch.script.yaml", options)


def _built(script: Path, options: dict[str, Any]) -> ScriptedChatModel:
    model = NoToolsModel.from_file(script, **options)
    BUILT.append(model)
    return model
