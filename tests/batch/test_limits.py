"""The limits a batch's local workers share on model calls, between real processes: call slots
(--max-concurrent) that a killed process gives back, a rate limit's hold-off seen by every
worker, and the budget's refusal."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from pathlib import Path

import pytest

from cabal.batch.limits import FileLimits
from cabal.errors import CallRefused
from tests.polling import wait_until

CONTEXT = multiprocessing.get_context("spawn")  # plain processes: nothing shared but the files


def hold_a_slot(limits: FileLimits, log: str, seconds: float) -> None:
    with limits.slot():
        with open(log, "a") as out:
            out.write(f"in {time.time()}\n")
        time.sleep(seconds)
        with open(log, "a") as out:
            out.write(f"out {time.time()}\n")


def most_at_once(log: Path) -> int:
    marks = sorted((float(t), kind) for kind, t in (line.split() for line in log.read_text().splitlines()))
    inside = most = 0
    for _, kind in marks:
        inside += 1 if kind == "in" else -1
        most = max(most, inside)
    return most


def test_at_most_max_concurrent_calls_are_in_flight_across_processes(tmp_path: Path) -> None:
    limits = FileLimits(str(tmp_path / "limits"), max_concurrent=2)
    limits.prepare()
    log = tmp_path / "calls.log"
    processes = [CONTEXT.Process(target=hold_a_slot, args=(limits, str(log), 0.3)) for _ in range(5)]
    started = time.monotonic()
    for process in processes:
        process.start()
    for process in processes:
        process.join(30)

    assert [p.exitcode for p in processes] == [0] * 5
    assert most_at_once(log) == 2
    assert log.read_text().count("in ") == 5
    assert time.monotonic() - started >= 0.9  # five calls of 0.3 s, two at a time


def test_a_killed_process_gives_its_slot_back(tmp_path: Path) -> None:
    limits = FileLimits(str(tmp_path / "limits"), max_concurrent=1)
    limits.prepare()
    holder = CONTEXT.Process(target=hold_a_slot, args=(limits, str(tmp_path / "a.log"), 60))
    holder.start()
    wait_until(lambda: (tmp_path / "a.log").exists(), timeout=30, what="the holder to take the slot")
    os.kill(holder.pid, signal.SIGKILL)
    holder.join(10)

    started = time.monotonic()
    with limits.slot():
        waited = time.monotonic() - started

    assert holder.exitcode == -signal.SIGKILL
    assert waited < 1.0  # the kernel released its lock with the process


def test_a_rate_limit_hold_off_makes_every_worker_wait(tmp_path: Path) -> None:
    limits = FileLimits(str(tmp_path / "limits"))
    limits.prepare()
    limits.hold_off(0.4)  # one worker was told to wait 0.4 s
    limits.hold_off(0.1)  # a shorter wait never shortens a longer one
    log = tmp_path / "calls.log"
    other = CONTEXT.Process(target=hold_a_slot, args=(limits, str(log), 0))
    asked = time.time()
    other.start()
    other.join(30)

    entered = float(log.read_text().split()[1])
    assert entered - asked >= 0.35


def test_a_refusal_stops_new_calls_until_cleared(tmp_path: Path) -> None:
    limits = FileLimits(str(tmp_path / "limits"), max_concurrent=1)
    limits.prepare()
    limits.refuse("the batch's cost budget is spent ($1.0100 of $1.00)")

    with pytest.raises(CallRefused) as refused, limits.slot():
        pass
    limits.prepare()  # a new run starts with no refusal
    with limits.slot():
        pass

    assert str(refused.value) == "the batch's cost budget is spent ($1.0100 of $1.00)"
    assert refused.value.provider == "batch"
