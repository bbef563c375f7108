"""The round loop's checkpointer, settled: a checkpoint waits for the graph writes before it.

A step sends its graph write behind (``cabal.graph.behind``) and the loop goes on; LangGraph
saves the step's checkpoint meanwhile, on its own thread. That checkpoint says the step is
done, so it must not be saved before the step's write is acknowledged: ``settled`` makes the
run's checkpointer wait for the writer first, and raise its failure (no checkpoint passes a
write that failed). Kept apart from ``checkpoints`` so that reading a mission (the workspace)
does not import LangGraph.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (BaseCheckpointSaver, ChannelVersions, Checkpoint, CheckpointMetadata,
                                       CheckpointTuple)

from cabal.graph.behind import WriteBehind


def settled(saver: BaseCheckpointSaver, writer: WriteBehind) -> BaseCheckpointSaver:
    """``saver`` whose saves wait for ``writer`` first."""
    return _Settled(saver, writer)


class _Settled(BaseCheckpointSaver):
    """``saver`` itself, except that ``put`` and ``put_writes`` settle the writer first. Only
    the synchronous methods: the round loop runs LangGraph's sync API."""

    def __init__(self, saver: BaseCheckpointSaver, writer: WriteBehind) -> None:
        super().__init__(serde=saver.serde)
        self.saver = saver
        self.writer = writer

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self.saver.get_tuple(config)

    def list(self, config: RunnableConfig | None, **options: Any) -> Iterator[CheckpointTuple]:
        return self.saver.list(config, **options)

    def put(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
            new_versions: ChannelVersions) -> RunnableConfig:
        self.writer.settle()
        return self.saver.put(config, checkpoint, metadata, new_versions)

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                   task_path: str = "") -> None:
        self.writer.settle()
        self.saver.put_writes(config, writes, task_id, task_path)

    def delete_thread(self, thread_id: str) -> None:
        self.saver.delete_thread(thread_id)

    def get_next_version(self, current: Any, channel: None) -> Any:
        return self.saver.get_next_version(current, channel)
