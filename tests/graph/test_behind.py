"""Write-behind (cabal.graph.behind): writes land in order on their own thread, every query of
the graph and every checkpoint waits for them, and a failed write stands until it is handled."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from cabal.errors import GraphUnavailable
from cabal.graph import ContextGraph
from cabal.graph.behind import WriteBehind


def node(node_id: str, **fields: object) -> dict:
    return {"id": node_id, "node_type": "actor", "type": "agent", "name": node_id, **fields}


@pytest.fixture
def writer(graph: ContextGraph) -> Iterator[WriteBehind]:
    """A writer attached to the test's graph, as a run attaches its own; closed and detached after."""
    writer = WriteBehind()
    graph.behind(writer)
    yield writer
    writer.close()
    graph.behind(None)


def test_writes_land_in_the_order_they_were_sent_and_a_query_sees_every_one(
        graph: ContextGraph, writer: WriteBehind) -> None:
    gate = threading.Event()
    writer.send(gate.wait)  # holds the writer until the writes below are queued
    for number in range(5):
        writer.send(lambda n=number: graph.create_cluster([node(f"a{n}")], updates=[
            {"id": "a0", "fields": {"last": n}}] if n else None))
    assert not writer.idle
    gate.set()
    # A query from this thread waits for all of them: the last update wins, every node is there.
    assert graph.get("a0")["last"] == 4
    assert sorted(n["id"] for n in graph.find("actor")) == ["a0", "a1", "a2", "a3", "a4"]
    assert writer.idle and (writer.sent, writer.waits) == (6, 1)


def test_a_failed_write_is_raised_at_every_later_send_and_query_and_its_queued_writes_are_dropped(
        graph: ContextGraph, writer: WriteBehind) -> None:
    gate = threading.Event()
    lost = GraphUnavailable("the test's server", "connection refused")

    def fail() -> None:
        gate.wait()
        raise lost

    writer.send(fail)
    writer.send(lambda: graph.create_cluster([node("after")]))  # queued behind the failure: dropped
    gate.set()
    with pytest.raises(GraphUnavailable) as raised:
        graph.get("anything")
    assert raised.value is lost
    with pytest.raises(GraphUnavailable):  # it stands: nothing may overtake it
        writer.send(lambda: None)
    with pytest.raises(GraphUnavailable):
        writer.settle()
    assert writer.finish() is lost  # the run handles it; then queries go on
    assert graph.get("after") is None and writer.finish() is None
    writer.send(lambda: graph.create_cluster([node("later")]))
    assert graph.get("later")["name"] == "later"


def test_the_writers_own_queries_do_not_wait_for_it(graph: ContextGraph, writer: WriteBehind) -> None:
    # A write that reads (a refused cluster explains itself with a read) runs on the writer's
    # thread: waiting there for the writer itself would never end.
    seen: list[object] = []
    writer.send(lambda: graph.create_cluster([node("w1")]))
    writer.send(lambda: seen.append(graph.get("w1")["id"]))
    writer.settle()
    assert seen == ["w1"]


def test_close_lets_the_queued_writes_land(graph: ContextGraph, writer: WriteBehind) -> None:
    gate = threading.Event()
    writer.send(gate.wait)
    writer.send(lambda: graph.create_cluster([node("last")]))
    gate.set()
    writer.close()
    graph.behind(None)
    assert graph.get("last")["id"] == "last"
    with pytest.raises(RuntimeError, match="closed"):
        writer.send(lambda: None)


class Batch:
    """A write that joins the batches queued after it: one call for all of them."""

    def __init__(self, names: tuple[str, ...], calls: list[tuple[str, ...]]) -> None:
        self.names, self.calls = names, calls

    def __call__(self) -> None:
        self.calls.append(self.names)

    def join(self, later: object) -> Batch | None:
        return Batch(self.names + later.names, self.calls) if isinstance(later, Batch) else None


def test_writes_queued_while_one_is_in_flight_go_out_as_one_where_they_join() -> None:
    writer, calls, gate = WriteBehind(), [], threading.Event()
    try:
        writer.send(gate.wait)
        for name in ("a", "b", "c"):
            writer.send(Batch((name,), calls))
        writer.send(lambda: calls.append(("plain",)))  # not a Batch: goes on its own
        writer.send(Batch(("d",), calls))
        gate.set()
        writer.settle()
        assert calls == [("a", "b", "c"), ("plain",), ("d",)]
        assert (writer.sent, writer.joined) == (6, 2)
    finally:
        writer.close()
