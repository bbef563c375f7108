"""A slow stand-in for a real model, for tests that run `cabal` in a subprocess.

`--model py:slow_factory:launch_model` (with this folder on PYTHONPATH) answers from the
launch example's script, each call taking CABAL_TEST_LATENCY seconds (default 0.3), so a
step's parallel operative turns are in flight long enough to kill the process among them.
"""

from __future__ import annotations

import os
from pathlib import Path

from cabal.llm import FunctionChatModel, ScriptedChatModel

LAUNCH_SCRIPT = Path(__file__).resolve().parents[3] / "examples" / "launch" / "launch.script.yaml"


def launch_model(**options) -> FunctionChatModel:
    script = ScriptedChatModel.from_file(LAUNCH_SCRIPT)

    def answer(request):
        return script.bind_tools(list(request.tools)).invoke(list(request.messages),
                                                             config={"metadata": dict(request.metadata)})

    latency = float(os.environ.get("CABAL_TEST_LATENCY", "0.3"))
    return FunctionChatModel(answer, latency_s=latency, **options)
