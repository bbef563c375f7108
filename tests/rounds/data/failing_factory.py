"""Models that fail in the two ways a user's own code can, for tests that run `cabal` in a subprocess.

`--model py:failing_factory:broken_model` (with this folder on PYTHONPATH): the factory itself
raises, so no mission starts. `--model py:failing_factory:crashing_model`: a model whose code
raises an error no provider would (a bug), inside the mission's first turn.
"""

from __future__ import annotations

from cabal.llm import FunctionChatModel


def broken_model(**options) -> FunctionChatModel:
    raise TypeError("no model today")


def crashing_model(**options) -> FunctionChatModel:
    def answer(request):
        raise RuntimeError("the model's own code broke")

    return FunctionChatModel(answer, **options)
