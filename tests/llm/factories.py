"""A model factory for ``make_model("py:tests.llm.factories:make")``."""

from __future__ import annotations

from typing import Any

from cabal.llm import ScriptedChatModel


def make(**options: Any) -> ScriptedChatModel:
    return ScriptedChatModel.from_entries(
        [{"round": "*", "step": "write", "agent": "*", "tool": "answer", "args": {"from": "factory"}, "repeat": True}],
        **options,
    )


not_a_model = 42


def not_a_factory() -> int:
    return 42
