"""A scripted model that also writes down every prompt it is shown.

`--model py:recording_factory:question_model` (with this folder on PYTHONPATH) answers from
question.script.yaml and appends the user prompt of each call to
`$CABAL_TEST_PROMPTS/r<round>.<step>.<agent>.txt`, so a test in another process can read what
an agent was shown.
"""

from __future__ import annotations

import os
from pathlib import Path

from cabal.llm import FunctionChatModel, ScriptedChatModel

QUESTION_SCRIPT = Path(__file__).resolve().parent / "question.script.yaml"


def question_model(**options) -> FunctionChatModel:
    script = ScriptedChatModel.from_file(QUESTION_SCRIPT)
    folder = Path(os.environ["CABAL_TEST_PROMPTS"])
    folder.mkdir(parents=True, exist_ok=True)

    def answer(request):
        name = f"r{request.key.round}.{request.key.step}.{request.key.agent}.txt"
        with open(folder / name, "a") as record:
            record.write(str(request.messages[1].content) + "\n")  # [system, user, ...]: the user prompt
        return script.bind_tools(list(request.tools)).invoke(list(request.messages),
                                                             config={"metadata": dict(request.metadata)})

    return FunctionChatModel(answer, **options)
