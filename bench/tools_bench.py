"""A tool call through Cabal against the same call made directly with the MCP SDK's client, in
the same run. Prints one `name value unit` line per figure, with the goal beside it.

The server: this script with ``--serve``, an ``MCPServer`` over stdio with one tool, ``lookup``
(a dictionary look-up: the tool itself costs next to nothing, so what is measured is the way
to it). Two copies run: one for each side, so neither side's session waits on the other's.

- direct: ``stdio_client`` + ``ClientSession``, ``await session.call_tool("lookup", ...)`` in
  the caller's own event loop: the least any client pays.
- cabal_host: ``ToolHost.call("bench__lookup", ...)`` from a plain thread, as a turn makes it:
  the call handed to the host's loop thread, the result's text made printable and bounded.
- cabal_turn: ``TurnTools.call``: the host's call plus what a turn adds (the ``tool_call`` and
  ``tool_result`` events to a listener, the record its moment is made of).

Each figure is the median (and 95th percentile) of CALLS calls per side after WARM_UP calls, the
sides interleaved call by call in rotating order; the ratio is cabal's median over direct's, and
``*_extra_p50`` the median of each Cabal call's time minus the direct call made beside it.
Both sides give the call the same timeout (``read_timeout_seconds``, 30 s: a client that must
not hang sets one). Goal (issue 22): a call through Cabal <= 1.2x the direct call.

Run: python bench/tools_bench.py [--blocks]   (about 15 s)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time

CALLS = 1_000
WARM_UP = 100
BLOCK = 100
PRICES = {f"product-{n}": f"{n}.99 USD a month" for n in range(100)}


def serve() -> None:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer(name="bench", log_level="WARNING")

    @server.tool(description="The monthly price of a product, by its name.")
    def lookup(product: str) -> str:
        return f"{product}: {PRICES.get(product, 'no price known')}"

    server.run("stdio")


def line(name: str, value: float, unit: str, goal: str | None = None) -> None:
    print(f"{name} {value:.3f} {unit}" + (f"  # goal: {goal}" if goal else ""), flush=True)


def _order(names: list[str], blocks: bool) -> list[tuple[int, str]]:
    """Which side makes call n, in what order. By default call by call, each side in turn (the
    order rotating): a machine shared with other work slows both sides alike. ``blocks``: each
    side's calls in blocks of BLOCK, the sides taking turns block by block."""
    if not blocks:
        return [(n, name) for n in range(WARM_UP + CALLS) for name in names[n % 3:] + names[:n % 3]]
    return [(n, name) for start in range(0, WARM_UP + CALLS, BLOCK) for name in names
            for n in range(start, min(start + BLOCK, WARM_UP + CALLS))]


async def measure(blocks: bool) -> dict[str, list[float]]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    from cabal.rounds.tooluse import TurnTools
    from cabal.rounds.writes import TurnPlace
    from cabal.tools.host import ToolHost
    from cabal.tools.spec import ToolServerSpec
    from cabal.vocabulary import Role, Step

    here = os.path.abspath(__file__)
    spec = ToolServerSpec(name="bench", command="python", args=(here, "--serve"))
    params = StdioServerParameters(command=sys.executable, args=[here, "--serve"])
    timings: dict[str, list[float]] = {"direct": [], "cabal_host": [], "cabal_turn": []}
    with open(os.devnull, "w") as quiet, ToolHost([spec]).start() as host:
        place = TurnPlace("m-bench", 1, Step.WRITE, "operative-1", "r1.write.operative-1")
        offered = host.tools_for("operative-1", Role.OPERATIVE, Step.WRITE)
        async with stdio_client(params, errlog=quiet) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()

            async def direct(argument: dict) -> None:
                result = await session.call_tool("lookup", argument, read_timeout_seconds=30)
                assert not result.is_error

            def through_host(argument: dict) -> None:
                assert host.call("bench__lookup", argument, round_number=1).ok

            def through_turn(argument: dict) -> None:
                tools = TurnTools(host, offered, place, max_calls=1, emit=lambda event: None)
                assert tools.call("bench__lookup", {**argument, "why": "bench"}, "").ok

            names = list(timings)
            for n, name in _order(names, blocks):
                argument = {"product": f"product-{n % 120}"}
                started = time.perf_counter()
                if name == "direct":
                    await direct(argument)
                else:
                    (through_host if name == "cabal_host" else through_turn)(argument)
                if n >= WARM_UP:
                    timings[name].append(time.perf_counter() - started)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve", action="store_true", help="be the benchmark's MCP server (stdio)")
    parser.add_argument("--blocks", action="store_true", help=f"the sides take turns every {BLOCK} calls")
    options = parser.parse_args()
    if options.serve:
        serve()
        return
    print(f"# machine: {os.cpu_count()} cores, 1-minute load average {os.getloadavg()[0]:.2f} at start", flush=True)
    print(f"# order: {'blocks of ' + str(BLOCK) if options.blocks else 'call by call'}", flush=True)
    timings = asyncio.run(measure(options.blocks))
    medians = {name: statistics.median(values) for name, values in timings.items()}
    for name, median in medians.items():
        line(f"tool_call_{name}_p50", median * 1000, "ms")
        line(f"tool_call_{name}_p95", statistics.quantiles(timings[name], n=20)[-1] * 1000, "ms")
    for name in ("cabal_host", "cabal_turn") if not options.blocks else ():  # paired with the direct call beside it
        extra = statistics.median(c - d for c, d in zip(timings[name], timings["direct"]))
        line(f"tool_call_{name}_extra_p50", extra * 1e6, "us")
    line("tool_call_cabal_host_over_direct", medians["cabal_host"] / medians["direct"], "x", "<= 1.2")
    line("tool_call_cabal_turn_over_direct", medians["cabal_turn"] / medians["direct"], "x", "<= 1.2")
    print(f"# 1-minute load average {os.getloadavg()[0]:.2f} at the end", flush=True)


if __name__ == "__main__":
    main()
