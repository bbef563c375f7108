"""A slow stand-in for a real model, for tests that run `cabal` in a subprocess.

`--model py:slow_factory:launch_model` (or `research_model`; with this folder on PYTHONPATH)
answers from the example's script, each call taking CABAL_TEST_LATENCY seconds (default 0.3),
so a step's parallel operative turns are in flight long enough to kill the process among them.
"""

from __future__ import annotations

import os
from pathlib import Path

from cabal.llm import FunctionChatModel, ScriptedChatModel

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
LAUNCH_SCRIPT = EXAMPLES / "launch" / "launch.script.yaml"
RESEARCH_SCRIPT = EXAMPLES / "research" / "research.script.yaml"


def launch_model(**options) -> FunctionChatModel:
    return _slow(LAUNCH_SCRIPT, **options)


def research_model(**options) -> FunctionChatModel:
    return _slow(RESEARCH_SCRIPT, **options)


def _slow(path: Path, **options) -> FunctionChatModel:
    script = ScriptedChatModel.from_file(path)

    def answer(request):
        return script.bind_tools(list(request.tools)).invoke(list(request.messages),
                                                             config={"metadata": dict(request.metadata)})

    latency = float(os.environ.get("CABAL_TEST_LATENCY", "0.3"))
    return FunctionChatModel(answer, latency_s=latency, **options)
