"""Cabal: run a team of AI agents in rounds over a FalkorDB context graph."""

__version__ = "0.1.0"
