"""A batch on a real Dask LocalCluster (worker processes), its checkpoints in a real Postgres:
a worker killed mid-mission, every mission still ending with the graph of a clean run; and
the limits workers share through the Dask scheduler."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from cabal import run_mission
from cabal.batch import run_batch
from cabal.batch.cluster import check_address
from cabal.batch.events import MissionLost, MissionAssigned
from cabal.batch.limits import DaskLimits
from cabal.batch.plan import load_plan
from cabal.errors import CallRefused, ConfigError

from .conftest import ANSWER, WorkerKiller, batch_file, mission_facts, readme_requests


def test_a_batch_on_a_dask_local_cluster_survives_a_killed_worker(home: str, tmp_path: Path, postgres: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import psycopg

    monkeypatch.setenv("CABAL_CHECKPOINTS", postgres)  # what a cluster's workers all reach
    path = batch_file(tmp_path, "cluster", readme_requests(6), model="py:slow_models:question", answers=[ANSWER])
    clean = run_mission(load_plan(path).missions[0].spec, home=home)
    assert (clean.state, clean.stop_reason) == ("done", "concluded")
    killer = WorkerKiller()  # kills a Dask worker process, not a thread

    result = run_batch(path, dask="local:2", home=home, on_event=killer)

    killed, events = killer.killed, killer.events
    assert len(killed) == 1
    assert result.report.summary() == "6 missions: 6 done"
    starts = [e for e in events if isinstance(e, MissionAssigned)]
    assert len({e.worker for e in starts}) >= 2  # two worker processes (three with the restarted one)
    assert [(e.attempt, e.resumed) for e in starts if e.mission_id == killed[0]] == [(1, False), (2, True)]
    assert [e.mission_id for e in events if isinstance(e, MissionLost)] == [killed[0]]
    assert {r.mission_id: r.attempts for r in result.report.rows}[killed[0]] == 2
    reference = mission_facts(home, clean.mission_id)
    for row in result.report.rows:
        assert mission_facts(home, row.mission_id) == reference, row.key
    # Every mission's checkpoints went to Postgres, none to the workspace's SQLite file.
    with psycopg.connect(postgres) as connection:
        threads = {row[0] for row in connection.execute("SELECT DISTINCT thread_id FROM checkpoints")}
    assert {row.mission_id for row in result.report.rows} | {clean.mission_id} <= threads
    sqlite_file = Path(home, "checkpoints.sqlite")
    if sqlite_file.exists():
        with sqlite3.connect(sqlite_file) as connection:
            local = {row[0] for row in connection.execute("SELECT DISTINCT thread_id FROM checkpoints")}
        assert not local & threads


def test_workers_share_call_slots_a_hold_off_and_a_refusal_through_the_scheduler() -> None:
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cluster, Client(cluster):
        limits = DaskLimits("cabal-test-limits", max_concurrent=2)
        limits.prepare()
        inside, most, lock = [0], [0], threading.Lock()

        def call() -> None:
            with limits.slot():
                with lock:
                    inside[0] += 1
                    most[0] = max(most[0], inside[0])
                time.sleep(0.1)
                with lock:
                    inside[0] -= 1

        threads = [threading.Thread(target=call) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        limits.hold_off(0.3)
        started = time.monotonic()
        with limits.slot():
            waited = time.monotonic() - started
        limits.refuse("the batch's token budget is spent (10 of 5 tokens)")
        with pytest.raises(CallRefused) as refused, limits.slot():
            pass
        limits.clear()
        with limits.slot():
            pass

    assert most[0] == 2
    assert waited >= 0.25
    assert str(refused.value) == "the batch's token budget is spent (10 of 5 tokens)"


@pytest.mark.parametrize(("address", "problem"), [
    ("local:0", "--dask local:0: a local cluster has 1 to 256 workers"),
    ("somewhere:8786", "--dask somewhere:8786: expected local:N or a scheduler address such as tcp://HOST:8786"),
])
def test_a_bad_cluster_address_is_one_line(address: str, problem: str) -> None:
    assert check_address("tcp://10.0.0.5:8786") == "tcp://10.0.0.5:8786"
    with pytest.raises(ConfigError) as error:
        check_address(address)
    assert str(error.value) == problem


def test_workers_on_other_machines_need_a_graph_server_and_checkpoints_they_reach() -> None:
    from cabal.batch.cluster import DaskPool

    here = {"tcp://127.0.0.1:40001": {}}
    elsewhere = {"tcp://127.0.0.1:40001": {}, "tcp://10.9.8.7:40002": {}}
    DaskPool("tcp://10.9.8.1:8786", url=None, checkpoints_shared=False)._check_reach(here)  # one machine: fine
    DaskPool("tcp://10.9.8.1:8786", url="redis://db:6379", checkpoints_shared=True)._check_reach(elsewhere)

    with pytest.raises(ConfigError) as graph:
        DaskPool("tcp://10.9.8.1:8786", url=None, checkpoints_shared=True)._check_reach(elsewhere)
    with pytest.raises(ConfigError) as checkpoints:
        DaskPool("tcp://10.9.8.1:8786", url="redis://db:6379", checkpoints_shared=False)._check_reach(elsewhere)

    assert str(graph.value) == "the Dask workers on 10.9.8.7 cannot reach this machine's embedded graph server"
    assert graph.value.hint == "set FALKORDB_URL to a FalkorDB server every worker reaches"
    assert str(checkpoints.value) == "the Dask workers on 10.9.8.7 cannot reach this workspace's SQLite checkpoints"
