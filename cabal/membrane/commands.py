"""Placeholder until this subsystem registers its commands."""


def register(commands) -> None:
    """Add this module's subcommands to the cabal parser."""
