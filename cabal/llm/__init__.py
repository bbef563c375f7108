"""The model layer: build chat models, call them, count what they cost.

The round engine calls models only through ``call_model``; tests and offline runs use
``ScriptedChatModel`` or ``FunctionChatModel`` in place of Claude.
"""

from cabal.llm.call import CallLimiter, ModelReply, RetryNotice, call_model
from cabal.llm.keys import AGENT_KEY, FACTS_KEY, ROUND_KEY, STEP_KEY, TURN_KEY, CallKey, call_metadata
from cabal.llm.models import make_model, model_name
from cabal.llm.settings import DEFAULT_MODEL, ModelSettings, RetryPolicy
from cabal.llm.scripted import FunctionChatModel, ModelCall, ModelRequest, ScriptedChatModel, ScriptEntry
from cabal.llm.usage import Budget, Usage

__all__ = [
    "AGENT_KEY",
    "DEFAULT_MODEL",
    "FACTS_KEY",
    "ROUND_KEY",
    "STEP_KEY",
    "TURN_KEY",
    "Budget",
    "CallKey",
    "CallLimiter",
    "FunctionChatModel",
    "ModelCall",
    "ModelReply",
    "ModelRequest",
    "ModelSettings",
    "RetryNotice",
    "RetryPolicy",
    "ScriptEntry",
    "ScriptedChatModel",
    "Usage",
    "call_metadata",
    "call_model",
    "make_model",
    "model_name",
]
