"""Options several commands share. Defined here, below every command module, so no subsystem
ever needs to import the command line."""

from __future__ import annotations

import argparse


def add_graph_options(parser: argparse.ArgumentParser, *, url: bool = True) -> argparse.ArgumentParser:
    """--home (and --url): where the graph is. Every command that touches a graph takes these."""
    if url:
        parser.add_argument("--url", help="FalkorDB URL (redis://, rediss://, unix://); default: FALKORDB_URL or embedded")
    parser.add_argument("--home", help="workspace directory (default: CABAL_HOME, else the nearest .cabal in this folder "
                        "or a parent, as git finds a repository; a new one is made here)")
    return parser


def add_model_option(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """--model: the model of every agent, over the mission file's (run, resume, batch, ...)."""
    parser.add_argument("--model", help="a model: PROVIDER:MODEL (openai:gpt-4.1-mini, ollama:qwen3:8b), "
                                        "claude-..., simulated, scripted:PATH, py:MODULE:FACTORY or "
                                        "replay:ID_OR_PATH (a recorded mission's calls); cabal models lists "
                                        "the providers")


def add_record_option(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """--no-record: the commands that run missions keep every model call unless told not to."""
    parser.add_argument("--no-record", action="store_true",
                        help="do not keep the mission's model calls in its cassette (missions/ID/cassette.jsonl)")
    return parser


def add_replay_options(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """--replay and --fallback-model: how a replayed model (replay:ID_OR_PATH) matches calls."""
    parser.add_argument("--replay", choices=("strict", "lenient"), default=None,
                        help="strict (default): a call must match the recording by place and by the hashes of its "
                             "messages and tools; lenient: by place alone")
    parser.add_argument("--fallback-model", metavar="SPEC",
                        help="in a lenient replay, the model that answers the calls the cassette lacks")
    return parser


def replay_model_spec(spec: str | None, args: argparse.Namespace) -> str | None:
    """``spec`` with the replay options of the command line, when it is a ``replay:`` spec."""
    mode, fallback = getattr(args, "replay", None), getattr(args, "fallback_model", None)
    if mode is None and fallback is None:
        return spec
    if not spec or not spec.startswith("replay:"):
        from cabal.errors import ConfigError

        raise ConfigError("--replay and --fallback-model go with a replayed model: --model replay:ID_OR_PATH")
    from cabal.llm.replay import parse_replay_spec, replay_spec

    ref, stored_mode, stored_fallback = parse_replay_spec(spec.removeprefix("replay:"))
    return replay_spec(ref, mode or stored_mode, fallback or stored_fallback)
