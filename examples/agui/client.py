"""A minimal AG-UI client of `cabal serve`: it starts a mission, prints the run as it streams
(steps, the team's messages), asks you the team's questions, and prints what was accepted.

    pip install 'cabal-agents[agui]'
    cabal serve &                      # http://127.0.0.1:8765/
    python examples/agui/client.py http://127.0.0.1:8765/ag-ui "Plan the launch of our app" --example launch

Every event is parsed with the protocol's own models (``ag_ui.core``); the state (the mission
and its product tree) is the snapshot with each delta applied as a JSON Patch. Run it again
with ``--thread`` and the thread it printed to take the same mission further.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from typing import Any

import httpx
import jsonpatch
from ag_ui.core import Event, RunAgentInput, UserMessage
from pydantic import TypeAdapter

EVENTS = TypeAdapter(Event)


def run(url: str, body: RunAgentInput, headers: dict[str, str], state: dict) -> tuple[Any, dict]:
    """Post one run and print its events as they come; its last event and the state at its end."""
    last, speaking = None, {}
    payload = body.model_dump(mode="json", by_alias=True)
    with httpx.stream("POST", url, json=payload, headers={"accept": "text/event-stream", **headers},
                      timeout=httpx.Timeout(30, read=None)) as response:
        if response.status_code != 200:
            sys.exit(f"refused ({response.status_code}): {response.read().decode()}")
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            event = last = EVENTS.validate_json(line.removeprefix("data: "))
            kind = event.type.value
            if kind == "STEP_STARTED":
                print(f"-- {event.step_name}", flush=True)
            elif kind == "TEXT_MESSAGE_START":
                speaking[event.message_id] = [event.name or event.role or "agent", ""]
            elif kind == "TEXT_MESSAGE_CONTENT":
                speaking[event.message_id][1] += event.delta
            elif kind == "TEXT_MESSAGE_END":
                name, text = speaking.pop(event.message_id)
                print(f"{name}: {text}", flush=True)
            elif kind == "STATE_SNAPSHOT":
                state = event.snapshot
            elif kind == "STATE_DELTA":
                state = jsonpatch.apply_patch(state, [op.model_dump(by_alias=True) if hasattr(op, "model_dump")
                                                      else op for op in event.delta])
    return last, state


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="the server's AG-UI endpoint, http://HOST:PORT/ag-ui")
    parser.add_argument("request", help="what the team should do (on a known --thread: your next message)")
    parser.add_argument("--example", help="a shipped example's team and settings (launch, research, ...)")
    parser.add_argument("--model", help="the model (a provider's, or 'simulated')")
    parser.add_argument("--thread", help="a thread (its mission) to go on with; default: a new one")
    parser.add_argument("--token", help="the server's token, when it listens beyond this machine")
    args = parser.parse_args()

    headers = {"authorization": f"Bearer {args.token}"} if args.token else {}
    settings = {key: value for key, value in (("example", args.example), ("model", args.model)) if value}
    thread = args.thread or str(uuid.uuid4())
    print(f"thread {thread}", flush=True)
    body = RunAgentInput(thread_id=thread, run_id=str(uuid.uuid4()), messages=[
        UserMessage(id=str(uuid.uuid4()), content=args.request)], forwarded_props={"cabal": settings})
    state: dict = {}
    while True:
        last, state = run(args.url, body, headers, state)
        if last is None or last.type.value == "RUN_ERROR":
            print(f"run error: {last.message if last else 'the stream ended early'}", flush=True)
            return 1
        outcome = getattr(last, "outcome", None)
        if outcome is None or outcome.type != "interrupt":
            break
        question = outcome.interrupts[0]
        options = (question.response_schema or {}).get("examples") or []
        print(f"? {question.message}" + (f" ({' / '.join(options)})" if options else ""), flush=True)
        answer = sys.stdin.readline().strip()
        body = RunAgentInput(thread_id=thread, run_id=str(uuid.uuid4()), messages=[], resume=[
            {"interrupt_id": question.id, "status": "resolved" if answer else "cancelled", "payload": answer}])
    result = last.result or {}
    print(f"run finished: {result.get('state')} ({result.get('stop_reason')}), round {result.get('round')}")
    accepted = [p["name"] for p in state.get("products", {}).values() if p["status"] == "accepted"]
    print("accepted: " + (", ".join(accepted) or "nothing"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
