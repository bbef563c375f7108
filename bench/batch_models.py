"""The bench's stand-in for a real model: the launch example's scripted team, each call
sleeping CABAL_BENCH_LATENCY seconds (0.5 by default), for ``bench/batch_bench.py``."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from cabal.llm import FunctionChatModel, ScriptedChatModel

LAUNCH_SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "launch" / "launch.script.yaml"
# Read once per process (the batch's fork server imports this module): a mission needs its own
# model, with its own place in the script, but not its own parse of the file.
LAUNCH_ENTRIES = yaml.safe_load(LAUNCH_SCRIPT.read_text())


def launch(**options) -> FunctionChatModel:
    script = ScriptedChatModel.from_entries(LAUNCH_ENTRIES, source=str(LAUNCH_SCRIPT))

    def answer(request):
        return script.bind_tools(list(request.tools)).invoke(list(request.messages),
                                                             config={"metadata": dict(request.metadata)})

    return FunctionChatModel(answer, latency_s=float(os.environ.get("CABAL_BENCH_LATENCY", "0.5")), **options)
