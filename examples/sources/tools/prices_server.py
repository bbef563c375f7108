"""A price look-up over the example's competitor price sheet, as an MCP server over stdio.

Written with the official MCP SDK's server (``MCPServer``, which mcp 2 calls what mcp 1 called
``FastMCP``). The mission file starts it (``tools:``) with the sheet's path in ``PRICES_CSV``;
run it by hand with ``PRICES_CSV=docs/competitor-prices.csv python tools/prices_server.py``.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

from mcp.server.mcpserver import MCPServer

server = MCPServer(name="prices", log_level="WARNING")


def _sheet() -> list[dict[str, str]]:
    path = Path(os.environ.get("PRICES_CSV", "docs/competitor-prices.csv"))
    with path.open(newline="", encoding="utf-8") as rows:
        return list(csv.DictReader(rows))


@server.tool(description="The monthly price in USD of a competitor's plans, by the competitor's name "
                         "(Notion, Evernote, Obsidian, GoodNotes, Quizlet); a plan name narrows it to one plan.")
def lookup(competitor: str, plan: str = "") -> str:
    rows = [row for row in _sheet() if row["competitor"].casefold() == competitor.strip().casefold()
            and (not plan or row["plan"].casefold() == plan.strip().casefold())]
    if not rows:
        known = sorted({row["competitor"] for row in _sheet()})
        return f"No price for {competitor} {plan}".rstrip() + f". Known competitors: {', '.join(known)}."
    return "\n".join(f"{row['competitor']} {row['plan']}: {row['price_usd_per_month']} USD a month"
                     for row in rows)


if __name__ == "__main__":
    server.run("stdio")
