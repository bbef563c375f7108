"""The FalkorDB context graph: server lifecycle, schema, and the ``ContextGraph`` door."""

from cabal.graph.context_graph import ContextGraph
from cabal.graph.server import EmbeddedServer

__all__ = ["ContextGraph", "EmbeddedServer"]
