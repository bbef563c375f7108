"""A batch of four missions on an OpenAI-compatible server that answers a burst of 429s: every
worker holds off, retries, and every mission ends done. Through the real openai client, in
the batch's own worker processes, against the local fake Chat Completions server."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from cabal.batch import run_batch
from cabal.rounds.events import ModelRetried
from tests.llm.fake_anthropic import CannedResponse
from tests.llm.fake_openai import FakeOpenAI, error_body, openai_prompts, tool_call_completion
from tests.llm.script_responder import key_of, scripted_answers
from cabal.vocabulary import Step

from .conftest import ANSWER, QUESTION_SCRIPT, batch_file, readme_requests


class RateLimitBurst:
    """Answers from the question script, except requests 3 to 8: 429 with a short retry-after.

    Four missions ask the same keys at once, so no script cursor is shared: each request gets
    a fresh one, and the Chair's bootstrap turn after the user's answer is told by that answer
    in its prompt (the script's second bootstrap entry)."""

    def __init__(self) -> None:
        self.seen = 0
        self.lock = threading.Lock()

    def __call__(self, body: dict):
        with self.lock:
            self.seen += 1
            limited = 3 <= self.seen <= 8
        if limited:
            return CannedResponse(429, error_body("Rate limit reached for requests", "requests", "rate_limit_exceeded"),
                                  {"retry-after": "0.05"})
        system, user, tools = openai_prompts(body)
        turn = int(key_of(system, user)[1] == Step.BOOTSTRAP and ANSWER in json.dumps(body.get("messages")))
        name, args, number = scripted_answers(QUESTION_SCRIPT)(system, user, tools, turn)
        return tool_call_completion([(name, args)], call_ids=[f"call_{self.seen:05d}"])


def test_a_batch_through_a_rate_limit_burst_ends_all_done(home: str, tmp_path: Path) -> None:
    with FakeOpenAI() as server:
        requests = readme_requests(4)
        server.respond_with(RateLimitBurst())
        # base_url in the mission's model: each worker reads it from the plan, not from this process's environment
        model = {"name": "openai:gpt-4.1-mini", "base_url": server.base_url, "max_retries": 8}
        path = batch_file(tmp_path, "burst", requests, answers=[ANSWER])
        text = path.read_text().replace(f"model: scripted:{QUESTION_SCRIPT}", "model: " + str(model).replace("'", '"'))
        path.write_text(text)
        events: list = []

        result = run_batch(path, workers=2, home=home, on_event=events.append)

    assert result.report.summary() == "4 missions: 4 done"
    assert sum(isinstance(e, ModelRetried) for e in events) == 6  # the burst, each 429 retried once
    assert all("cache_control" not in str(r.body) for r in server.requests)
