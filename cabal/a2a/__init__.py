"""``cabal a2a``: the workspace's team as an agent of the A2A protocol, on Google's official SDK.

A message starts a mission of the served team (one mission file, one model) whose request is
the message's text; the task's id is the mission's id. The task's state follows the mission's
(``tasks.task_state``): ``working`` while it runs, ``input-required`` when the Chair asks or a
gate waits, ``completed`` with the accepted products as its artifacts, ``failed``, ``canceled``
when the user stops it (``cabal stop``, or the protocol's cancel). A message on a task that
waits answers the mission's question and resumes it. Tasks are kept in the workspace
(``tasks.WorkspaceTaskStore``), so a task is still answerable after the server restarts.

- ``card``: the Agent Card, drawn from the team and the mission file;
- ``executor``: the ``AgentExecutor`` that runs missions (in worker threads) and tells the SDK;
- ``tasks``: a mission as a task, and the durable task store;
- ``server``: the Starlette app (the SDK's routes behind ``cabal.web``'s guard) and uvicorn.
"""

from __future__ import annotations

DEFAULT_PORT = 8766
