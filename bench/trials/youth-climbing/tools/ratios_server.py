"""The insurer's ratio table as an MCP server over stdio (the official SDK's MCPServer)."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer(name="ratios", log_level="WARNING")

# (activity, youngest age, oldest age) -> climbers per member of staff
TABLE = {
    ("bouldering", 8, 11): 8,
    ("bouldering", 12, 17): 10,
    ("top-rope", 8, 11): 4,
    ("top-rope", 12, 17): 6,
    ("lead", 14, 17): 2,
}


@server.tool(description="The insurer's minimum staff-to-climber ratio for an activity "
                         "(bouldering, top-rope, lead) and a climber's age in years.")
def ratio(activity: str, age: int) -> str:
    for (kind, youngest, oldest), climbers in TABLE.items():
        if kind == activity.strip().lower() and youngest <= age <= oldest:
            return (f"{kind}, ages {youngest}-{oldest}: at least 1 member of staff for every "
                    f"{climbers} climbers (Summit Mutual schedule 4, table 4.2)")
    if activity.strip().lower() == "lead":
        return "lead climbing: not covered for climbers under 14 (Summit Mutual schedule 4, table 4.2)"
    return f"No ratio for {activity!r} at age {age}. Activities: bouldering, top-rope, lead; ages 8-17."


if __name__ == "__main__":
    server.run("stdio")
