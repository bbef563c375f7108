"""The words of a mission: its steps, states, stop reasons and turn outcomes, and the ids of the
agents every team has.

Values only, no behaviour and no I/O. Every module that names a step, a state or a fixed agent
imports it from here; the enums are ``StrEnum``s, so they compare equal to, and serialise as, the
plain strings stored in the graph and printed in JSON.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import StrEnum
from typing import Final

CABAL_VERSION = "0.1.0"
"""The package's version, here so that every layer can read it (pyproject.toml reads it from here too)."""

DISTRIBUTION = "cabal-agents"
"""The name Cabal is installed by (``pip install cabal-agents``): ``cabal`` on the package index is
another project's. The import package and the command keep the name ``cabal``."""


def install_command(extra: str) -> str:
    """The exact command that installs Cabal with one of its extras: what a missing package's hint says."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"


class Step(StrEnum):
    """The steps of a mission, in the order a round runs them (bootstrap once, before round 1)."""

    BOOTSTRAP = "bootstrap"
    REFLECT = "reflect"
    PLAN = "plan"
    WRITE = "write"
    PEER_REVIEW = "peer_review"
    INSPECT = "inspect"
    CLOSE = "close"  # after Inspect: the Chair decides this round's versions that passed (the last round: all of them)
    PRESENTATION = "presentation"

    @property
    def heading(self) -> str:
        """How prompts and transcripts name the step."""
        return _HEADINGS[self]

    @property
    def position(self) -> int:
        """The step's place in a round, for sorting what happened in it."""
        return _ORDER.index(self)


_ORDER = tuple(Step)
_HEADINGS = {
    Step.BOOTSTRAP: "Bootstrap (round 0)",
    Step.REFLECT: "Reflect",
    Step.PLAN: "Plan & Assign",
    Step.WRITE: "Write",
    Step.PEER_REVIEW: "Peer Review",
    Step.INSPECT: "Inspect",
    Step.CLOSE: "Closing decisions",
    Step.PRESENTATION: "Presentation",
}


class MissionState(StrEnum):
    """Where a mission is. ``running`` is only ever shown while a process drives it."""

    RUNNING = "running"
    HALTED = "halted"  # waiting for the user's answer to a question
    INTERRUPTED = "interrupted"  # paused by the model provider, a kill or Ctrl-C: `cabal resume` goes on
    DONE = "done"
    FAILED = "failed"  # an error in the engine or the team's data: the message says which
    DIVERGED = "diverged"  # a replay met a call its recording does not answer: the message says where, and how


ANSWER_FROM_FILE: Final = "mission file"  # where an unattended answer came from (answer_source on the halt)


class MissionKind(StrEnum):
    """What made a mission's products: a team in rounds, or one call of a model (``cabal baseline``)."""

    TEAM = "team"
    BASELINE = "baseline"


class NotStarted(StrEnum):
    """Where a batch's mission is before it has a state of its own (a ``MissionState`` after)."""

    PENDING = "pending"  # waiting for a worker, or for the batch to go on
    INVALID = "invalid"  # its mission file is broken: it never runs
    REFUSED = "refused"  # it could not start (its model or settings were refused); a re-run tries again


class StopReason(StrEnum):
    """Why a mission stopped or paused (the names of cabal-rounds.md)."""

    CONCLUDED = "concluded"  # the Chair halted ``done``
    NO_MORE_ROUNDS = "noMoreRounds"
    BUDGET = "budget"
    USER_HALT = "userHalt"  # the user asked the team to stop
    ERROR = "error"
    QUESTION = "questionToUser"  # paused: the Chair asked the user something
    REPLAY_DIVERGED = "replayDiverged"  # a replayed call differs from the recording's, or it recorded none there


# How people read the words above: every status line, show, transcript, export, page and CLI
# line says these, never the stored names (which JSON and the graph keep, for programs).
STOP_PHRASES: dict[str, str] = {
    StopReason.CONCLUDED: "concluded",
    StopReason.NO_MORE_ROUNDS: "round limit reached",
    StopReason.BUDGET: "budget spent",
    StopReason.USER_HALT: "stopped at your request",
    StopReason.ERROR: "error",
    StopReason.QUESTION: "waiting for your answer",
    StopReason.REPLAY_DIVERGED: "a call the recording does not answer",
}
HALT_PHRASES: dict[str, str] = {"question": "a question for you", "done": "the mission is done"}


def stop_phrase(reason: str | None) -> str:
    """A stop reason as people read it (``noMoreRounds``: "round limit reached"); '' for none."""
    return STOP_PHRASES.get(reason, reason) if reason else ""


def halt_phrase(halt_type: str) -> str:
    """A halt's type as people read it (``question``: "a question for you")."""
    return HALT_PHRASES.get(halt_type, halt_type)


def count_of(number: int, singular: str, plural: str | None = None) -> str:
    """``number`` things in words: "1 attempt", "3 attempts" (``plural``: when it is not singular + s)."""
    return f"{number} {singular if number == 1 else plural or singular + 's'}"


NOT_PRICED = "not priced"
"""What a cost reads for a model no price is known for (a local one): never $0, which says it was free."""


def cost_phrase(cost_usd: float, *, unpriced: int = 0, of: int = 0) -> str:
    """A cost as people read it: ``$0.0123``; "not priced" when none of the ``of`` turns it sums
    was on a priced model, and the priced part "+ not priced" when ``unpriced`` of them were not."""
    if not unpriced:
        return f"${cost_usd:.4f}"
    return NOT_PRICED if unpriced >= of else f"${cost_usd:.4f} + {NOT_PRICED}"


def price_hint(models: Sequence[str]) -> str:
    """How to count the cost of ``models``, which no price is known for."""
    one = len(models) == 1
    return (f"{', '.join(models)} {'is' if one else 'are'} {NOT_PRICED}: to count {'its' if one else 'their'} cost, "
            "give the model a price in the mission file (model: {name: ..., price: {input_per_mtok: N, "
            "output_per_mtok: N}}, US dollars per million tokens)")


def state_phrase(state: str, reason: str | None) -> str:
    """A mission's state and why, as one phrase: ``done (round limit reached)``, ``running``."""
    return f"{state} ({stop_phrase(reason)})" if reason else state


class TurnOutcome(StrEnum):
    """How one agent's turn in one step ended."""

    FINAL = "final"  # a valid answer, written
    HALT = "halt"  # the Chair paused the mission (a question) or ended it (done)
    FAILED = "failed"  # no valid answer within the retry budget; nothing written
    INTERRUPTED = "interrupted"  # stopped early (budget spent, model unavailable): only its spend is
    # recorded, under its own id, and the turn runs again when the mission goes on


class Role(StrEnum):
    CHAIR = "chair"
    OPERATIVE = "operative"
    WATCHDOG = "watchdog"
    ENVOY = "envoy"


BUDGET_HALT = re.compile(r"r\d+\.budget\d*")
"""The ids of the questions a spent budget raises (``r3.budget``, ``r3.budget2``): the engine asks
them, not the Chair, and their answer raises the budget or stops the mission."""

ROLE_WORDS: dict[str, Role] = {word: role for role in Role for word in (role.value, f"{role.value}s")}
"""The words a file names a role by, singular or plural (``watchdog``, ``watchdogs``): every
agent of that role. The one map of role names (tool permissions, whom a card speaks as)."""

CHAIR_ID = "chair-1"
WATCHDOG_ID = "watchdog-1"
ENVOY_ID = "envoy-1"
USER_ID = "user"
"""The mission's user: the author of answers and notes."""
MCP_ACTOR = "actor-mcp"
MCP_SERVER_NAME = "cabal"
"""The name ``cabal mcp`` gives itself; a mission's tool server that answers with it is refused
(Cabal's own protocols are never offered to the team)."""
"""Who writes through ``cabal mcp`` unless its ``--actor`` says otherwise."""

FIXED_IDS: dict[Role, str] = {Role.CHAIR: CHAIR_ID, Role.WATCHDOG: WATCHDOG_ID, Role.ENVOY: ENVOY_ID}
"""The id of each role's agent when its card names no members (the Chair and the Envoy are
always one, with these ids; a watchdog card may name several)."""

BLOCKING_IMPORTANCE = 8
"""A collab at or above this importance blocks acceptance of its product."""
ENDORSEMENT = "endorsement"
"""The collab type of praise: it asks nothing, so it needs no answer and blocks nothing."""
USER_COLLAB_TYPE = "user_independent"
"""Type of the collab the engine records for a user message that targets no product."""
USER_DIRECTION_TYPE = "user_direction"
"""Type of the collab that holds the new direction of a mission the user continued after it ended."""

DEFAULT_OPERATIVES = 2
"""How many operatives a team has when neither the mission nor the operative card says."""

AGENT_SUFFIX = r"[a-z0-9]+(?:-[a-z0-9]+)*"
"""What follows an agent's kind in its id: ``operative-2``, ``operative-pricing``,
``watchdog-security``. The one pattern of agent ids: entities, role cards, mission files, the
simulated team and events all build on it (``agent_pattern``)."""
AGENT_ID_CHARS = 60
"""The longest agent id."""


def agent_pattern(*roles: Role) -> str:
    """A regular expression (no anchors) for the ids of agents of ``roles`` (default: every role)."""
    kinds = [role.value for role in roles or tuple(Role)]
    return (f"(?:{'|'.join(kinds)})" if len(kinds) > 1 else kinds[0]) + f"-{AGENT_SUFFIX}"


AGENT_ID = re.compile(rf"^{agent_pattern()}$")
OPERATIVE_PATTERN = agent_pattern(Role.OPERATIVE)
"""The shape of an operative's id, for schemas; ``OPERATIVE_ID`` matches a whole id."""
OPERATIVE_ID = re.compile(rf"^{OPERATIVE_PATTERN}$")


def operative_id(number: int) -> str:
    """The id of the ``number``-th operative (from 1)."""
    return f"operative-{number}"


def role_ids(role: Role, operatives: int) -> tuple[str, ...]:
    """The ids of a role's agents on a team with ``operatives`` counted operatives."""
    if role is Role.OPERATIVE:
        return tuple(operative_id(n) for n in range(1, operatives + 1))
    return (FIXED_IDS[role],)


def role_of(agent_id: str) -> Role | None:
    """The role an agent id names (its kind), or None when it is no agent id."""
    if len(agent_id) > AGENT_ID_CHARS or not AGENT_ID.match(agent_id):
        return None
    return Role(agent_id.split("-", 1)[0])


def is_agent_id(agent_id: str) -> bool:
    """Whether ``agent_id`` has the shape of a team member's id (whatever the team)."""
    return role_of(agent_id) is not None
