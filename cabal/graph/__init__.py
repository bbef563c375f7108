"""The FalkorDB context graph: server lifecycle, schema, and the ``ContextGraph`` door.

The names are imported on first use, so the idle watcher (``python -m cabal.graph.idle``)
starts without the FalkorDB client."""

from cabal.lazy import lazy_names

__all__ = ["ContextGraph", "EmbeddedServer"]
__getattr__ = lazy_names(__name__, {"ContextGraph": "context_graph", "EmbeddedServer": "server"})
