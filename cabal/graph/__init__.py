"""The FalkorDB context graph: server lifecycle, schema, and the ``ContextGraph`` door.

The names are imported on first use, so the idle watcher (``python -m cabal.graph.idle``)
starts without the FalkorDB client."""

from typing import TYPE_CHECKING

from cabal.lazy import lazy_names

if TYPE_CHECKING:  # the same names, typed for checkers; at run time each loads on first use
    from cabal.graph.context_graph import ContextGraph
    from cabal.graph.server import EmbeddedServer

__all__ = ["ContextGraph", "EmbeddedServer"]
__getattr__ = lazy_names(__name__, {"ContextGraph": "context_graph", "EmbeddedServer": "server"})
