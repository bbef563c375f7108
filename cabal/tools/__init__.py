"""The team's tools over MCP: the mission file's servers (``spec``) and the host that connects
to them and calls their tools for the round engine (``host``)."""
