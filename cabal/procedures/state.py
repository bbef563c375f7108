"""A run's state as its links hold it (B4): which step is active, which are done, who is inside.

The links are bookkeeping, not routing: the runtime moves a run explicitly (B3) and these
values only record where it is, so a new process can read them back (B6).

Link values (run space R, step S, actor A):

- active step:    R -acts_on-> S        energy 8, polarity [0.9, 0.1] (forward: R works on S)
- completed step: R -receives_from-> S  energy 1, polarity [0.2, 0.8] (backward: S hands on to R)
- running actor:  A -occupies-> R       energy 8
- finished actor: A -inhabits-> R       energy 1

"Flip current step (receives from, e=1)" is read the way end_procedure flips occupies to
inhabits: the same (R, S) pair changes link type, acts_on -> receives_from, in the cluster
that heats the next step. Direction stays R -> S; the backward polarity is what says the flow
now runs from the step into the run. So "acts_on" only ever names a step being worked on,
one (R, S) pair has one link at a time, and a retried flip finds nothing left to undo.
"""

from __future__ import annotations

from dataclasses import dataclass

from cabal.errors import ProcedureError

ACTIVE_STEP = {"energy": 8, "polarity": [0.9, 0.1]}
COMPLETED_STEP = {"energy": 1, "polarity": [0.2, 0.8]}
OCCUPYING = {"energy": 8}
INHABITING = {"energy": 1}
HOT = 5  # energy above which a forward step link is the active step
COLD = 2  # energy below which a backward step link is a completed step


def _polarity(link: dict) -> tuple[float, float] | None:
    polarity = link["properties"].get("polarity")
    if isinstance(polarity, list) and len(polarity) == 2:
        return float(polarity[0]), float(polarity[1])
    return None


def is_active(link: dict) -> bool:
    polarity = _polarity(link)
    return link["type"] == "acts_on" and link["properties"].get("energy", 0) > HOT and polarity is not None and polarity[0] > polarity[1]


def is_completed(link: dict) -> bool:
    # Either link type: a cooled acts_on (written by another tool) still reads as done.
    polarity = _polarity(link)
    return (
        link["type"] in ("acts_on", "receives_from")
        and link["properties"].get("energy", 0) < COLD
        and polarity is not None
        and polarity[1] > polarity[0]
    )


@dataclass(frozen=True)
class RunState:
    run_id: str
    template_id: str
    status: str  # "active" | "completed"
    active: tuple[str, ...]  # step node ids with an active link: exactly one in a healthy run
    completed: tuple[str, ...]
    occupants: tuple[str, ...]  # actors with an occupies link

    @property
    def orphaned(self) -> bool:
        return self.status == "active" and len(self.active) != 1


def read_state(run: dict, outgoing: list[dict], occupying: list[dict]) -> RunState:
    """``outgoing``: every link leaving the run space; ``occupying``: the occupies links into it."""
    template = next((link["to"] for link in outgoing if link["type"] == "elaborates"), None)
    if template is None:
        raise ProcedureError(f"run {run['id']!r} elaborates no procedure template", run_id=run["id"])
    return RunState(
        run_id=run["id"],
        template_id=template,
        status=run.get("status", "active"),
        active=tuple(link["to"] for link in outgoing if is_active(link)),
        completed=tuple(link["to"] for link in outgoing if is_completed(link)),
        occupants=tuple(link["from"] for link in occupying),
    )
