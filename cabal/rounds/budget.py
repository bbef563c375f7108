"""The mission's spend, and the gate every model call passes before it starts.

A call reserves its worst case (its prompt and a full-length answer) until it returns, and
starts only if that fits in the budget beside the calls already in flight, or if no other call
is in flight (then it may overshoot by at most its own worst case). So a budget is never
overspent by more than one call's worst case, however many operatives call at once. When the gate closes, ``BudgetSpent`` stops the turn that asked; the
engine then stops the mission or asks the user, as the mission file says.
"""

from __future__ import annotations

import threading

from cabal.llm.usage import Budget, Usage


class BudgetSpent(Exception):
    """Control flow, not an error: the budget allows no further call."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class SpendMeter:
    """Thread-safe: the operatives of a step share one meter."""

    def __init__(self, budget: Budget, spent: Usage, model_name: str) -> None:
        self.budget = budget
        self.model_name = model_name
        self._spent = spent
        self._reserved: list[Usage] = []
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
            return self.budget.exceeded(self._spent, self.model_name)

    def admit(self, worst_case: Usage) -> Usage:
        """Reserve one call's worst case, or raise ``BudgetSpent``. Returns the reservation, to
        hand back to ``settle`` with what the call really spent.

        A call starts at once when its worst case fits beside the calls in flight, or when no
        call is in flight (the one overshoot allowed); otherwise it waits for one to return."""
        with self._changed:
            while True:
                reason = self.budget.exceeded(self._spent, self.model_name) if self.limited else None
                if reason:
                    raise BudgetSpent(reason)
                fits = not self.limited or self.budget.exceeded(
                    sum(self._reserved, self._spent) + worst_case, self.model_name) is None
                if fits or not self._reserved:
                    self._reserved.append(worst_case)
                    return worst_case
                self._changed.wait()

    def settle(self, reservation: Usage, actual: Usage) -> None:
        with self._changed:
            self._reserved.remove(reservation)
            self._spent = self._spent + actual
            self._changed.notify_all()

    def raise_to(self, budget: Budget) -> None:
        with self._changed:
            self.budget = budget
            self._changed.notify_all()
