"""What a mission's start loads (issue 32): importing the API that runs a mission, its models and
the simulated team loads Cabal's engine packages and nothing of the web page, batches, the A2A
server, the MCP server, evaluations, reports or the command line, and parses no YAML file (the
role cards and protocols are read when a mission first needs them)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import json, sys
import cabal.yaml_reader as reader
parsed = []
plain = reader._parsed
reader._parsed = lambda text: parsed.append(text) or plain(text)
import cabal.rounds.api, cabal.llm, cabal.rounds.simulated
from cabal import resources
print(json.dumps({
    "cabal": sorted({".".join(name.split(".")[:2]) for name in sys.modules if name.split(".")[0] == "cabal"}),
    "others": sorted({name.split(".")[0] for name in sys.modules} & set(json.loads(sys.argv[1]))),
    "yaml_documents": len(parsed), "files_parsed": len(resources._PARSED),
}))
"""

# Packages a plain mission never uses, or uses only once asked (a provider's SDK for its model,
# the MCP client for a mission's tools, OpenTelemetry's exporter for traces, the web server).
NOT_AT_START = ["mcp", "a2a", "anthropic", "openai", "ollama", "langchain_anthropic", "langchain_openai",
                "langchain_ollama", "starlette", "uvicorn", "fastapi", "jinja2", "dask", "markdown"]


def test_the_mission_api_loads_the_engine_and_nothing_else_and_parses_no_yaml():
    result = subprocess.run([sys.executable, "-c", PROBE, json.dumps(NOT_AT_START)], capture_output=True, text=True,
                            timeout=120, cwd=ROOT, check=False)
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout.strip().splitlines()[-1])

    assert loaded == {
        "cabal": ["cabal", "cabal.config", "cabal.entities", "cabal.errors", "cabal.graph", "cabal.lazy",
                  "cabal.limits", "cabal.llm", "cabal.locks", "cabal.membrane", "cabal.private", "cabal.refs",
                  "cabal.resources", "cabal.rounds", "cabal.sources", "cabal.tools", "cabal.vocabulary",
                  "cabal.yaml_reader"],
        "others": [],
        "yaml_documents": 0,
        "files_parsed": 0,
    }
