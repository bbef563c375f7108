"""Models for the batch tests: scripted ones that take their time (to kill a worker mid-mission),
and one that breaks.

`model: py:slow_models:question` (this folder is on sys.path: tests/batch/conftest.py puts it
there before any worker process starts) answers from the question mission's script, each
call sleeping LATENCY_S, so a mission is still running when its worker is killed.
"""

from __future__ import annotations

from pathlib import Path

from cabal.llm import FunctionChatModel, ScriptedChatModel

QUESTION_SCRIPT = Path(__file__).resolve().parents[2] / "rounds" / "data" / "question.script.yaml"
LATENCY_S = 0.08


def question(**options) -> FunctionChatModel:
    script = ScriptedChatModel.from_file(QUESTION_SCRIPT)

    def answer(request):
        return script.bind_tools(list(request.tools)).invoke(list(request.messages),
                                                             config={"metadata": dict(request.metadata)})

    return FunctionChatModel(answer, latency_s=LATENCY_S, **options)


def broken(**options) -> FunctionChatModel:
    """A model whose every call breaks in a way no retry fixes: the mission fails."""

    def answer(request):
        raise RuntimeError("the model's adapter is broken")

    return FunctionChatModel(answer, **options)
