"""The model layer: build chat models, call them, count what they cost.

The round engine calls models only through ``call_model``; tests and offline runs use
``ScriptedChatModel`` or ``FunctionChatModel`` in place of Claude.

Everything below loads on first use, so that ``cabal.llm.usage`` (prices, budgets) can be
imported without LangChain by the commands that only read a mission.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "ModelReply": "call", "RetryNotice": "call", "call_model": "call",
    "AGENT_KEY": "keys", "FACTS_KEY": "keys", "ROUND_KEY": "keys", "STEP_KEY": "keys", "TURN_KEY": "keys",
    "CallKey": "keys", "call_metadata": "keys",
    "make_model": "models", "model_name": "models",
    "DEFAULT_MODEL": "settings", "ModelSettings": "settings", "RetryPolicy": "settings",
    "FunctionChatModel": "scripted", "ModelCall": "scripted", "ModelRequest": "scripted",
    "ScriptedChatModel": "scripted", "ScriptEntry": "scripted",
    "Budget": "usage", "Usage": "usage",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(f"cabal.llm.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'cabal.llm' has no attribute {name!r}")
