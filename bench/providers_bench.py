"""Cabal's model call against each provider's own LangChain client, on the same local server in
the same run; and a process's start to its first model call, ``openai:`` against ``claude-*``.
Prints one ``name value unit`` line per figure, with the goal beside it.

The servers are the tests' fakes (tests/llm/fake_anthropic.py, fake_openai.py, fake_ollama.py),
each answering every request with one fixed tool call at once, so what is timed is the client
side: building the request, the HTTP round trip on loopback, reading the reply.

- call_overhead (per provider path: anthropic, openai, ollama): the median time of one call,
  Cabal's ``call_model(make_model(spec), messages, tools)`` (the engine's path: tools bound at
  each call, the provider's prompt preparation, the reply read into a ``ModelReply`` with its
  usage, the call told to the run's listener) over the provider's own client
  (``ChatX(...).bind_tools(tools).invoke(messages)``, bound once), CALLS calls each, the two
  sides interleaved in ROUNDS rounds after a warm-up. Same messages, same tool, same server.
  Goal (issue 21): <= 1.1x.
- first_call: a fresh ``python`` (this script with --child SPEC) from its start to the moment
  the server receives its first request: imports, ``make_model``, ``call_model``. Median of
  STARTS starts, the two specs interleaved. ``openai:`` imports only the openai SDK and
  ``claude-*`` only the anthropic one (tests/rounds/test_provider_missions.py asserts it).

Run: python bench/providers_bench.py   (about a minute on the project's 2-core machine)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from langchain_core.messages import HumanMessage, SystemMessage  # noqa: E402

from cabal.llm import call_metadata, call_model, make_model  # noqa: E402
from tests.llm.fake_anthropic import FakeAnthropic, message_body, tool_use_block  # noqa: E402
from tests.llm.fake_ollama import FakeOllama, tool_call_lines  # noqa: E402
from tests.llm.fake_openai import FakeOpenAI, tool_call_completion  # noqa: E402

CALLS, ROUNDS, STARTS = 40, 5, 5
KEY = "sk-bench-0000"
TOOL = {"name": "final_output", "description": "Submit the step's answer.",
        "input_schema": {"type": "object", "properties": {"versions": {"type": "array", "items": {"type": "object"}}},
                         "required": ["versions"]}}
ARGS = {"versions": [{"productId": "p1", "content": "A first version of the product, a few sentences long."}]}
MESSAGES = [SystemMessage([{"type": "text", "text": "You are the Operative of a Cabal team. " * 40},
                           {"type": "text", "text": "You are Ada (operative-1). " * 10}]),
            HumanMessage([{"type": "text", "text": "# Charter\n" + "The mission's charter. " * 80},
                          {"type": "text", "text": "# Round 1\nWrite p1."}])]
METADATA = call_metadata(round=1, step="write", agent="operative-1")
SPECS = {"anthropic": "claude-sonnet-4-6", "openai": "openai:gpt-4.1-mini", "ollama": "ollama:qwen3:8b"}


def servers() -> dict[str, object]:
    anthropic, openai, ollama = FakeAnthropic().start(), FakeOpenAI().start(), FakeOllama().start()
    anthropic.respond_with(lambda body: message_body([tool_use_block("final_output", ARGS)], stop_reason="tool_use"))
    openai.respond_with(lambda body: tool_call_completion([("final_output", ARGS)]))
    ollama.respond_with(lambda body: tool_call_lines("final_output", ARGS))
    os.environ.update(ANTHROPIC_API_KEY=KEY, ANTHROPIC_BASE_URL=anthropic.url, OPENAI_API_KEY=KEY,
                      OPENAI_BASE_URL=openai.base_url, OLLAMA_HOST=ollama.url)
    return {"anthropic": anthropic, "openai": openai, "ollama": ollama}


def own_client(path: str):
    """The provider's own LangChain client, built as its documentation shows, tools bound once."""
    if path == "anthropic":
        from langchain_anthropic import ChatAnthropic

        model = ChatAnthropic(model="claude-sonnet-4-6", base_url=os.environ["ANTHROPIC_BASE_URL"], api_key=KEY,
                              max_retries=0)
    elif path == "openai":
        from langchain_openai import ChatOpenAI

        model = ChatOpenAI(model="gpt-4.1-mini", base_url=os.environ["OPENAI_BASE_URL"], api_key=KEY, max_retries=0)
    else:
        from langchain_ollama import ChatOllama

        model = ChatOllama(model="qwen3:8b", base_url=os.environ["OLLAMA_HOST"])
    return model.bind_tools([TOOL], tool_choice="any")


def timed(call, count: int) -> float:
    started = time.perf_counter()
    for _ in range(count):
        call()
    return (time.perf_counter() - started) / count


def call_overhead() -> None:
    for path, spec in SPECS.items():
        cabal_model, own = make_model(spec), own_client(path)

        def cabal_call() -> None:
            call_model(cabal_model, MESSAGES, [TOOL], metadata=METADATA)

        def own_call() -> None:
            own.invoke(MESSAGES)

        timed(cabal_call, 5), timed(own_call, 5)  # warm-up: connections, caches
        cabal_s, own_s = [], []
        for _ in range(ROUNDS):
            cabal_s.append(timed(cabal_call, CALLS))
            own_s.append(timed(own_call, CALLS))
        cabal_ms, own_ms = statistics.median(cabal_s) * 1000, statistics.median(own_s) * 1000
        print(f"call_overhead[{path}].cabal {cabal_ms:.2f} ms")
        print(f"call_overhead[{path}].own_client {own_ms:.2f} ms")
        print(f"call_overhead[{path}].ratio {cabal_ms / own_ms:.2f} x   (goal <= 1.1)")


def first_call(found: dict[str, object]) -> None:
    results: dict[str, list[float]] = {"openai": [], "anthropic": []}
    for _ in range(STARTS):
        for path in results:
            server = found[path]
            before = len(server.requests)
            started = time.perf_counter()
            child = subprocess.Popen([sys.executable, __file__, "--child", SPECS[path]], env=os.environ.copy(),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            while len(server.requests) == before and child.poll() is None:
                time.sleep(0.002)
            results[path].append(time.perf_counter() - started)
            _, errors = child.communicate(timeout=60)
            if child.returncode:
                raise SystemExit(f"child {SPECS[path]} failed: {errors.decode()[-500:]}")
    for path, times in results.items():
        print(f"first_call[{SPECS[path]}] {statistics.median(times) * 1000:.0f} ms")
    ratio = statistics.median(results["openai"]) / statistics.median(results["anthropic"])
    print(f"first_call.openai_over_claude {ratio:.2f} x")


def child(spec: str) -> None:
    call_model(make_model(spec), MESSAGES, [TOOL], metadata=METADATA)
    wanted = {"openai:": "anthropic", "claude": "openai"}
    other = next(module for prefix, module in wanted.items() if spec.startswith(prefix))
    if other in sys.modules:
        raise SystemExit(f"{spec} loaded {other}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", metavar="SPEC")
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    found = servers()
    try:
        call_overhead()
        first_call(found)
    finally:
        for server in found.values():
            server.stop()


if __name__ == "__main__":
    main()
