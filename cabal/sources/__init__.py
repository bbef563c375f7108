"""Sources: the user's files, read as text into a mission's graph, searched and cited.

``model`` is the vocabulary (entries, limits, what a file becomes), ``collect`` finds and reads
the files (confined, bounded, binary skipped), ``chunks`` cuts text into sections. Writing them
to the graph is the engine's (``cabal.rounds.sources``, through the ``add_source`` protocol).
"""

from cabal.sources.collect import collect, folder_wanted, mission_wanted, read_source, typed_wanted
from cabal.sources.model import (CITED_ID, SOURCE_ID, Chunk, Collected, SourceEntry, SourceLimits, SourceText, Wanted,
                                 chunk_node_id, latest_versions, source_node_id)

__all__ = ["CITED_ID", "SOURCE_ID", "Chunk", "Collected", "SourceEntry", "SourceLimits", "SourceText", "Wanted",
           "chunk_node_id", "collect", "folder_wanted", "latest_versions", "mission_wanted", "read_source", "source_node_id", "typed_wanted"]
