"""Missions on a Dask cluster: each mission one task on an existing scheduler
(``tcp://HOST:8786``), or on a ``LocalCluster`` of N worker processes started here (``local:N``).

The scheduler does the placing and the retrying: a task whose worker dies is given to another
worker (``distributed.scheduler.allowed-failures`` times, 3 by default), which finds the
mission and resumes it from its last checkpoint. Workers on other machines need the same
graph server (``FALKORDB_URL``) and a checkpoint store they can reach
(``CABAL_CHECKPOINTS=postgresql://...``); the batch sends both with each task. What workers
say while a mission runs travels as Dask events on a topic of the batch's own.
"""

from __future__ import annotations

import logging
import pickle
import re
import secrets
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlparse

from cabal.batch.events import MissionLost
from cabal.batch.limits import DaskLimits
from cabal.batch.worker import MissionTask, run_task
from cabal.errors import ConfigError
from cabal.vocabulary import install_command

LOCAL = re.compile(r"local:(\d+)")
SCHEDULER_SCHEMES = ("tcp", "tls", "inproc", "ucx", "ws", "wss")


def check_address(address: str) -> str:
    """``address`` if it names a cluster (``local:N`` or a scheduler URL), else a ConfigError."""
    local = LOCAL.fullmatch(address)
    if local:
        if not 1 <= int(local.group(1)) <= 256:
            raise ConfigError(f"--dask {address}: a local cluster has 1 to 256 workers")
        return address
    if urlparse(address).scheme in SCHEDULER_SCHEMES and urlparse(address).netloc:
        return address
    raise ConfigError(f"--dask {address}: expected local:N or a scheduler address such as tcp://HOST:8786")


class DaskPool:
    """Runs tasks as Dask tasks, one mission each."""

    def __init__(self, address: str, *, url: str | None, checkpoints_shared: bool) -> None:
        self.address = check_address(address)
        self.url = url
        self.checkpoints_shared = checkpoints_shared
        self.run_token = secrets.token_hex(4)  # names this run's topic and shared limits on the scheduler
        self.workers = 0
        self._client: Any = None

    def describe(self) -> str:
        local = LOCAL.fullmatch(self.address)
        if local:
            return f"a Dask LocalCluster of {local.group(1)} worker processes"
        return f"the Dask cluster at {self.address} ({self.workers} workers)"

    def limits(self, batch_id: str, folder: str, max_concurrent: int | None) -> DaskLimits:
        return DaskLimits(f"cabal-{batch_id}-{self.run_token}", max_concurrent)

    @contextmanager
    def opened(self) -> Iterator[None]:
        """Connected to the cluster (started here for ``local:N``) until the end of the block."""
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise ConfigError("--dask needs Dask's distributed package", hint=install_command("cluster")) from None

        logging.getLogger("distributed").setLevel(logging.ERROR)  # a restarted worker is ours to report
        local = LOCAL.fullmatch(self.address)
        if local:
            cluster = LocalCluster(n_workers=int(local.group(1)), threads_per_worker=1, processes=True,
                                   dashboard_address=None, silence_logs=logging.ERROR)
            client = Client(cluster)
        else:
            cluster = None
            try:
                client = Client(self.address, timeout=30)
            except OSError as error:
                raise ConfigError(f"cannot reach the Dask scheduler at {self.address}: {error}") from None
        try:
            workers = client.scheduler_info()["workers"]
            self.workers = len(workers)
            if not local:
                self._check_reach(workers)
            self._client = client
            yield
        finally:
            self._client = None
            client.close()
            if cluster is not None:
                cluster.close()

    def run(self, tasks: list[MissionTask], deliver: Callable[[Any], None]) -> None:
        """Every task on the cluster; ``deliver`` gets the workers' messages (from the client's
        own thread) and each outcome."""
        from distributed import as_completed

        client = self._client

        topic = f"cabal-{self.run_token}"
        client.subscribe_topic(topic, lambda event: deliver(_from_wire(event[1])))
        try:
            futures = {client.submit(_dask_task, task, topic, key=f"{task.mission_id}-{self.run_token}",
                                     pure=False): task for task in tasks}
            for future in as_completed(futures):
                task = futures[future]
                try:
                    deliver(future.result())
                except Exception as error:  # noqa: BLE001 - KilledWorker, a worker that lost cabal...
                    reason = " ".join(str(error).split())[:300] or type(error).__name__
                    deliver(MissionLost(task.mission_id, task.attempt, f"{type(error).__name__}: {reason}",
                                        retry=False))
        finally:
            client.unsubscribe_topic(topic)

    def _check_reach(self, workers: dict[str, Any]) -> None:
        """Workers on other machines cannot reach this machine's embedded graph or SQLite file."""
        here = _local_hosts()
        remote = sorted({host for address in workers if (host := urlparse(address).hostname) is not None} - here)
        if not remote:
            return
        if self.url is None:
            raise ConfigError(f"the Dask workers on {', '.join(remote)} cannot reach this machine's embedded "
                              "graph server", hint="set FALKORDB_URL to a FalkorDB server every worker reaches")
        if not self.checkpoints_shared:
            raise ConfigError(f"the Dask workers on {', '.join(remote)} cannot reach this workspace's SQLite "
                              "checkpoints", hint="set CABAL_CHECKPOINTS=postgresql://... (a server every worker reaches)")


def _dask_task(task: MissionTask, topic: str) -> Any:
    """The task a Dask worker runs: one mission, its messages logged under ``topic``."""
    from distributed import get_worker

    worker = get_worker()
    return run_task(task, lambda message: worker.log_event(topic, _to_wire(message)))


def _to_wire(message: Any) -> dict[str, Any]:
    """Dask events travel as msgpack, so a message goes as its pickle: the batch's own values
    and the missions' typed events arrive as they were sent. Both ends run the same cabal, as
    they must for the task itself, which Dask pickles too."""
    return {"pickled": pickle.dumps(message)}


def _from_wire(data: dict[str, Any]) -> Any:
    return pickle.loads(data["pickled"])


def _local_hosts() -> set[str]:
    hosts = {"127.0.0.1", "localhost", "::1", socket.gethostname()}
    try:
        hosts |= set(socket.gethostbyname_ex(socket.gethostname())[2])
    except OSError:
        pass
    return hosts
