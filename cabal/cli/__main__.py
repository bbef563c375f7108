"""``python -m cabal.cli``: the same as the ``cabal`` command."""

from cabal.cli import entry

entry()
