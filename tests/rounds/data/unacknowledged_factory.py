"""The launch example's model in a process that dies between a graph write's send and its reply.

`--model py:unacknowledged_factory:launch_model` (this folder on PYTHONPATH): the run's writer
thread (``cabal.graph.behind``) sends its CABAL_TEST_DIE_AT_WRITE-th write to the server as it
always does, waits until the server has applied it, and the process then kills itself with
SIGKILL without reading the reply: the write is in the graph, and nothing in the process knew
it landed. Its step's number and the write's query go to CABAL_TEST_DIE_LOG first.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from cabal.graph import schema
from cabal.graph.context_graph import ContextGraph
from cabal.graph.writes import build_cluster_query
from cabal.llm import FunctionChatModel, ScriptedChatModel

LAUNCH_SCRIPT = Path(__file__).resolve().parents[3] / "examples" / "launch" / "launch.script.yaml"
_sent = 0
_real_create_cluster = ContextGraph.create_cluster


def _create_cluster_then_die(self, nodes, links=None, *, updates=None, unlinks=None):
    global _sent
    if threading.current_thread().name != "cabal-writer":
        return _real_create_cluster(self, nodes, links, updates=updates, unlinks=unlinks)
    _sent += 1
    if _sent != int(os.environ.get("CABAL_TEST_DIE_AT_WRITE") or 0):  # 0: a resume, which lives
        return _real_create_cluster(self, nodes, links, updates=updates, unlinks=unlinks)
    query = build_cluster_query(nodes, links or [], updates, unlinks)
    ids = sorted(node["id"] for node in nodes)
    Path(os.environ["CABAL_TEST_DIE_LOG"]).write_text("\n".join(ids))
    connection = self._db.connection.connection_pool.get_connection()
    connection.send_command("GRAPH.QUERY", self.name, schema.cypher_header(query.params) + query.fresh_text,
                            "--compact")
    time.sleep(0.5)  # the server applies it meanwhile; the reply is never read
    os.kill(os.getpid(), signal.SIGKILL)


ContextGraph.create_cluster = _create_cluster_then_die


def launch_model(**options) -> FunctionChatModel:
    script = ScriptedChatModel.from_file(LAUNCH_SCRIPT)

    def answer(request):
        return script.bind_tools(list(request.tools)).invoke(list(request.messages),
                                                             config={"metadata": dict(request.metadata)})

    return FunctionChatModel(answer, **options)
