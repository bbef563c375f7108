"""Session state and its graph node."""

from __future__ import annotations

import pytest

from cabal.errors import ProtocolRuntimeError
from cabal.membrane.session import Frame, Session, SessionStore


def test_state_round_trips_through_json():
    session = Session.new("p", {"actor_id": "a", "n": 1}, "s-1")
    session.frames = [Frame("p", "ask", ""), Frame("q", "inner", "call.")]
    session.answers["ask"] = ["x"]
    session.nodes.append({"id": "n", "node_type": "thing", "type": "x", "name": "n"})
    again = Session.from_state(session.to_state(), stored=True)
    assert again == session and again.stored
    assert again.current_step == "inner" and again.call_stack == [Frame("p", "ask", "")]


def test_state_must_be_plain_data():
    with pytest.raises(ProtocolRuntimeError, match="not JSON"):
        Session.new("p", {"when": object()}).to_state()


def test_store_creates_loads_and_saves(graph):
    store = SessionStore(graph)
    session = Session.new("p", {}, "s-1")
    session.frames = [Frame("p", "a")]
    assert store.load("s-1") is None
    store.create(session)
    assert session.stored
    node = graph.get("s-1")
    assert (node["node_type"], node["type"], node["protocol"], node["status"]) == ("session", "membrane", "p", "active")
    session.status = "aborted"
    store.save(session)
    assert store.load("s-1").status == "aborted"


def test_a_node_that_is_not_a_session_is_not_loaded(graph):
    graph.create_cluster([{"id": "x", "node_type": "thing", "type": "t", "name": "x"}])
    assert SessionStore(graph).load("x") is None
