"""The model layer: build chat models, call them, count what they cost.

The round engine calls models only through ``call_model``; tests and offline runs use
``ScriptedChatModel`` or ``FunctionChatModel`` in place of Claude.

Everything below loads on first use, so that ``cabal.llm.usage`` (prices, budgets) can be
imported without LangChain by the commands that only read a mission.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cabal.lazy import lazy_names

if TYPE_CHECKING:  # the same names, typed for checkers; at run time each loads on first use
    from cabal.llm.call import CallLimiter, ModelReply, RetryNotice, call_model
    from cabal.llm.keys import AGENT_KEY, FACTS_KEY, ROUND_KEY, STEP_KEY, TURN_KEY, CallKey, call_metadata
    from cabal.llm.models import make_model, model_name
    from cabal.llm.settings import DEFAULT_MODEL, ModelSettings, RetryPolicy
    from cabal.llm.scripted import FunctionChatModel, ModelCall, ModelRequest, ScriptedChatModel, ScriptEntry
    from cabal.llm.usage import Budget, Usage

_EXPORTS = {
    "CallLimiter": "call", "ModelReply": "call", "RetryNotice": "call", "call_model": "call",
    "AGENT_KEY": "keys", "FACTS_KEY": "keys", "ROUND_KEY": "keys", "STEP_KEY": "keys", "TURN_KEY": "keys",
    "CallKey": "keys", "call_metadata": "keys",
    "make_model": "models", "model_name": "models",
    "DEFAULT_MODEL": "settings", "ModelSettings": "settings", "RetryPolicy": "settings",
    "FunctionChatModel": "scripted", "ModelCall": "scripted", "ModelRequest": "scripted",
    "ScriptedChatModel": "scripted", "ScriptEntry": "scripted",
    "Budget": "usage", "Usage": "usage",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_names(__name__, _EXPORTS)
