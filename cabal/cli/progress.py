"""What a terminal shows while a mission runs: a listener of the run's events.

On a terminal, every agent at work is shown at once (parallel operatives included) with its
step, elapsed time, tokens and cost, under a line with the mission's spend against its budget;
finished turns and the conversation scroll above. Anywhere else, plain lines: one per finished
turn, and the conversation as it happens. Either way each round's Envoy lines appear as soon as
its Presentation is written, and a question is printed once, when it is asked.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from typing import IO, Any

from cabal.limits import printable
from cabal.report.markdown import conversation_line
from cabal.report.model import Line, agent_label
from cabal.rounds.events import (
    Answered, GraphRestarted, HaltRaised, MissionContinued, MissionEvent, MissionInterrupted, MissionResumed,
    MissionStarted, MissionStopped, ModelCalled, ModelRetried, Presented, RoundStarted, RunEnded, StepStarted,
    ToolReturned, TurnDone, TurnStarted, UserMessage, Warned,
)
from cabal.vocabulary import CHAIR_ID, StopReason, TurnOutcome, cost_phrase, stop_phrase

REFRESHES_PER_SECOND = 4


def round_heading(round_number: int) -> str:
    return f"\n── round {round_number} ──"


def budget_text(tokens: int | None, cost_usd: float | None, source: str) -> str:
    """A new mission's budget and where it came from, as its first line says it."""
    limits = [f"${cost_usd:.2f}" if cost_usd is not None else "", f"{tokens:,} tokens" if tokens is not None else ""]
    shown = " and ".join(limit for limit in limits if limit)
    if source == "default":
        return f"budget {shown} (default; --budget-usd or budget: none to change)"
    if not shown:
        return "no budget (budget: none)"
    return f"budget {shown} ({'no cost limit' if source == 'none' else source})"


@dataclass
class _Working:
    """An agent's turn in flight."""

    step: str
    started: float
    tokens: int = 0
    cost: float = 0.0


class Progress:
    """The listener ``cabal run``, ``resume`` and ``chat`` give a mission; ``close()`` when done."""

    def __init__(self, stream: IO[str] | None = None, *, live: bool | None = None) -> None:
        self.stream = stream or sys.stdout
        self.live = self.stream.isatty() if live is None else live
        self._lock = threading.RLock()
        self._working: dict[str, _Working] = {}
        self._names: dict[str, str] = {}  # the team's own names by agent id, from the run's first event
        self._where = ""
        self._started = time.time()
        self._spent_before = (0, 0.0)  # what earlier runs of the mission spent
        self._committed = (0, 0.0)  # tokens and dollars of the turns finished in this run
        self._turns = (0, 0)  # the mission's turns finished, and how many of them were on a model without a price
        self._budget: tuple[int | None, float | None] = (None, None)
        self._heading: int | None = None  # the round whose heading was printed last
        self._live: Any = None
        self._console: Any = None
        self.interrupted = False  # the pause was said (MissionInterrupted): the command need not say it again

    # ------------------------------------------------------------------------------ events

    def __call__(self, event: MissionEvent) -> None:
        with self._lock:
            self._handle(event)

    def _handle(self, event: MissionEvent) -> None:  # noqa: C901 - one branch per kind of event
        if isinstance(event, (MissionStarted, MissionResumed)):
            self._names = dict(event.names)
        if isinstance(event, MissionStarted):
            self._started = event.at
            self._budget = (event.budget_tokens, event.budget_cost_usd)
            self._print(f"mission {event.mission}: {event.operatives} operatives, up to {event.rounds} rounds, "
                        f"model {event.model}, {budget_text(event.budget_tokens, event.budget_cost_usd, event.budget_source)}")
        elif isinstance(event, MissionResumed):
            self._started = event.at
            self._budget = (event.budget_tokens, event.budget_cost_usd)
            self._spent_before = (event.spent_tokens, event.spent_cost_usd)
            self._turns = (event.spent_turns, event.spent_unpriced_turns)  # a total's cost is the whole mission's
            self._heading = None  # the round's lines still to come are shown under its heading
            self._where = f"round {event.round}"
            where = f"at the start of round {event.round}" if event.at_start else f"in round {event.round}"
            spent = cost_phrase(event.spent_cost_usd, unpriced=event.spent_unpriced_turns, of=event.spent_turns)
            self._print(f"mission {event.mission} resumed {where} "
                        + (f"({event.spent_tokens:,} tokens so far; cost {spent})" if event.spent_unpriced_turns
                           else f"({event.spent_tokens:,} tokens, {spent} spent so far)"))
        elif isinstance(event, MissionContinued):
            self._say(Line(round=event.round, speaker="you", text=event.direction, kind="direction"))
            self._print(f"the mission continues, up to round {event.rounds}")
        elif isinstance(event, RoundStarted):
            self._budget = (event.budget_tokens, event.budget_cost_usd)
            self._where = f"round {event.round}"
        elif isinstance(event, StepStarted):
            self._where = f"round {event.round} · {event.step}"
        elif isinstance(event, TurnStarted):
            self._working[event.agent] = _Working(str(event.step), event.at)
        elif isinstance(event, ModelCalled):
            working = self._working.get(event.agent)
            if working is not None:
                working.tokens += event.input_tokens + event.output_tokens
                working.cost += event.cost_usd
        elif isinstance(event, TurnDone):
            self._turn_done(event)
        elif isinstance(event, ToolReturned):  # a tool's answer is data: shown printable and short
            digest = event.digest if len(event.digest) <= 80 else event.digest[:79] + "…"
            self._print(f"round {event.round} · {event.step} · {self._who(event.agent)} called {event.tool}: "
                        f"{'denied' if event.denied else 'ok' if event.ok else 'error'}, {digest}", dim=event.ok)
        elif isinstance(event, Presented):
            for line in event.lines:
                self._say(Line(round=event.round, speaker=line.speaker, text=line.text, kind="message"))
        elif isinstance(event, HaltRaised):
            self._say(Line(round=event.round, speaker=event.asker, text=event.message, kind="question",
                           options=event.options))
        elif isinstance(event, Answered):
            speaker = {"mission file": "you (mission file)", "policy": "cabal (the mission file's gates policy)"}.get(
                event.source, "you")
            self._say(Line(round=event.round, speaker=speaker, text=event.text, kind="answer"))
        elif isinstance(event, UserMessage):
            self._say(Line(round=event.round, speaker="you", text=event.text, kind="note"))
        elif isinstance(event, RunEnded):
            self.close()  # nothing runs any more: give the terminal back (`cabal chat` reads the next answer)
        elif isinstance(event, ModelRetried):  # said on a plain output too: why the run waits
            self._print(f"round {event.round} · {event.step} · {self._who(event.agent)}: {event.reason}; "
                        f"retry {event.retry} of {event.max_retries} in {event.wait_s:.1f} s")
        elif isinstance(event, GraphRestarted):  # said on a plain output too: why the step runs again
            self._print(f"the graph server stopped ({event.detail}); started it again, replaying from round "
                        f"{event.round}'s last checkpoint (restart {event.restart} of {event.max_restarts})")
        elif isinstance(event, MissionInterrupted):
            self.interrupted = True  # from now on plain lines: a turn still in flight must not redraw the footer
            self.close()  # the live footer goes before the last lines, or it stays stale under them
            self._print(f"paused: {event.detail}; go on with: {event.hint}")
        elif isinstance(event, Warned):
            self._print(f"warning: {event.message}")
        elif isinstance(event, MissionStopped):
            if event.reason == StopReason.CONCLUDED and event.detail:
                self._say(Line(round=event.round, speaker=CHAIR_ID, text=event.detail, kind="done"))
            else:
                self._print(f"ended: {stop_phrase(event.reason)}" + (f" ({event.detail})" if event.detail else ""))

    def _turn_done(self, event: TurnDone) -> None:
        self._working.pop(event.agent, None)
        tokens, cost = self._committed
        self._committed = (tokens + event.input_tokens + event.output_tokens, cost + event.cost_usd)
        self._turns = (self._turns[0] + 1, self._turns[1] + (not event.priced))
        # Tagged: a turn that failed, and one that asks the user (a Plan that concludes asks nothing).
        note = (" (failed)" if event.outcome == TurnOutcome.FAILED
                else " (question)" if event.outcome == TurnOutcome.HALT and event.halt == "question" else "")
        retries = (f", {event.attempts - 1} retr{'y' if event.attempts == 2 else 'ies'}" if event.attempts > 1 else "")
        total_tokens, total_cost = self._total()
        text = (f"round {event.round} · {event.step} · {self._who(event.agent)}{note}{retries} · "
                f"{total_tokens:,} tokens · {cost_phrase(total_cost, unpriced=self._turns[1], of=self._turns[0])}")
        if event.outcome == TurnOutcome.FAILED and event.problems:
            text += f"\n  rejected: {'; '.join(event.problems)}"
        self._print(text, dim=event.outcome == TurnOutcome.FINAL)

    # ----------------------------------------------------------------------------- output

    def _who(self, agent_id: str) -> str:
        """An agent as every other place shows it: ``Dana (operative-1)`` (``agent_label``)."""
        return agent_label(agent_id, self._names.get(agent_id))

    def _say(self, line: Line) -> None:
        if line.round != self._heading:
            self._heading = line.round
            self._print(round_heading(line.round))
        self._print(conversation_line(line, speaker=self._who(line.speaker)))

    def _print(self, text: str, *, dim: bool = False) -> None:
        text = printable(text)  # model and user text: no escape sequence reaches the terminal
        if not self.live or self.interrupted:
            print(text, file=self.stream, flush=True)
            return
        self._start_live()
        from rich.text import Text

        self._console.print(Text(text, style="dim" if dim else ""))

    def _start_live(self) -> None:
        if self._live is not None:
            return
        from rich.console import Console
        from rich.live import Live

        self._console = Console(file=self.stream, highlight=False, soft_wrap=True)
        self._live = Live(console=self._console, get_renderable=self._panel, refresh_per_second=REFRESHES_PER_SECOND,
                          transient=True, redirect_stdout=False, redirect_stderr=False)
        self._live.start()

    def _panel(self) -> Any:
        """The live part: the spend line, then one row per agent at work."""
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        # Called by the display's refresh thread while it holds the display's lock; an event being
        # handled holds ours and may be printing (which waits for the display's), so this reads
        # without our lock: copying a dict is atomic, and a row a refresh late is harmless.
        now = time.time()
        working = sorted(list(self._working.items()))
        tokens, cost = self._total()
        working_tokens = sum(w.tokens for _, w in working)
        working_cost = sum(w.cost for _, w in working)
        budget_tokens, budget_cost = self._budget
        where = self._where
        spent = f"{tokens + working_tokens:,}" + (f" / {budget_tokens:,}" if budget_tokens else "") + " tokens"
        spent += f" · ${cost + working_cost:.4f}" + (f" / ${budget_cost:.2f}" if budget_cost else "")
        header = Text.assemble((where or "starting", "bold"), f" · {_clock(now - self._started)} · {spent}")
        table = Table.grid(padding=(0, 2))
        for agent, turn in working:
            table.add_row(f"  {self._who(agent)}", turn.step, _clock(now - turn.started), f"{turn.tokens:,} tokens",
                          f"${turn.cost:.4f}")
        return Group(header, table) if working else header

    def _total(self) -> tuple[int, float]:
        return self._spent_before[0] + self._committed[0], self._spent_before[1] + self._committed[1]

    def close(self) -> None:
        """Stop the live display (the terminal gets its cursor back); plain output needs nothing."""
        with self._lock:
            if self._live is not None:
                self._live.stop()
                self._live = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(max(seconds, 0)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
