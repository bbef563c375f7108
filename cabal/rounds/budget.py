"""The mission's spend, and the gate every model call passes before it starts.

A call reserves its worst case (its prompt, estimated from its length, and a full-length
answer) until it returns, and starts only if that fits in the budget beside the calls already
in flight, or if no other call is in flight and its prompt alone fits (then its answer may pass
the budget, by at most its ``max_tokens``). A call whose prompt would pass the budget asks first:
a 100,000-token budget once stopped at 113,576 used, a long prompt sent over the limit. So a budget
is never overspent by more than one answer, however many operatives call at once. When the gate
closes, ``BudgetSpent`` stops the turn that asked; the engine then stops the mission or asks the
user, as the mission file says.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from cabal.llm.usage import Budget, Usage


class BudgetSpent(Exception):
    """Control flow, not an error: the budget allows no further call."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Reservation:
    """One call's worst case, on the model it calls (what it would cost depends on it)."""

    usage: Usage
    model: str

    @property
    def cost_usd(self) -> float:
        return self.usage.cost_usd(self.model)


class SpendMeter:
    """Thread-safe: the operatives of a step share one meter. Dollars are summed call by call,
    each on its own model's prices, so agents on different models count alike."""

    def __init__(self, budget: Budget, spent: Usage, spent_cost_usd: float, models: str) -> None:
        self.budget = budget
        self.models = models  # the model names a cost budget speaks of
        self._spent = spent
        self._cost = spent_cost_usd
        self._reserved: list[Reservation] = []
        self._changed = threading.Condition()

    @property
    def spent(self) -> Usage:
        with self._changed:
            return self._spent

    @property
    def limited(self) -> bool:
        return self.budget.max_tokens is not None or self.budget.max_cost_usd is not None

    def exceeded(self) -> str | None:
        """Why the budget allows no further call, or None."""
        with self._changed:
            return self.budget.exceeded_by(self._spent, self._cost, self.models)

    def admit(self, worst_case: Usage, model: str) -> Reservation:
        """Reserve one call's worst case on ``model``, or raise ``BudgetSpent``. Returns the
        reservation, to hand back to ``settle`` with what the call really spent.

        A call starts at once when its worst case fits beside the calls in flight, or when no
        call is in flight (the one overshoot allowed); otherwise it waits for one to return."""
        reservation = Reservation(worst_case, model)
        with self._changed:
            while True:
                reason = self.budget.exceeded_by(self._spent, self._cost, self.models) if self.limited else None
                if reason:
                    raise BudgetSpent(reason)
                held = [*self._reserved, reservation]
                fits = not self.limited or self.budget.exceeded_by(
                    sum((r.usage for r in held), self._spent), self._cost + sum(r.cost_usd for r in held),
                    self.models) is None
                if fits:
                    self._reserved.append(reservation)
                    return reservation
                if not self._reserved:  # alone: it may pass the budget by its answer, never by its prompt
                    prompt = Usage(input_tokens=worst_case.input_tokens)
                    reason = self.budget.passed_by_prompt(self._spent, self._cost, prompt, prompt.cost_usd(model),
                                                          self.models)
                    if reason:
                        raise BudgetSpent(reason)
                    self._reserved.append(reservation)
                    return reservation
                self._changed.wait()

    def settle(self, reservation: Reservation, actual: Usage) -> None:
        with self._changed:
            self._reserved.remove(reservation)
            self._spent = self._spent + actual
            self._cost += actual.cost_usd(reservation.model)
            self._changed.notify_all()

    def raise_to(self, budget: Budget) -> None:
        with self._changed:
            self.budget = budget
            self._changed.notify_all()
