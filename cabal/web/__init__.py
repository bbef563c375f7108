"""``cabal serve``: the team's room in a browser.

A Starlette application on uvicorn, rendered on the server, kept live by server-sent events.
One module per job: ``app`` (the routes), ``views`` (rendering, with the report's own
sections), ``state`` (what the pages show, read from the workspace), ``live`` (the event
streams and the poll of missions other processes drive), ``runner`` (missions in the
server's worker threads), ``forms`` (starting a mission from the page), ``security`` (the
token, CSRF, the headers), ``server`` (the socket and uvicorn), and ``agui`` with
``agui_events`` (a run over AG-UI at ``POST /ag-ui``, and its events in the protocol's types).

This package file stays light: the command line reads its defaults without loading the rest.
"""

DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8765
