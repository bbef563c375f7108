"""``python -m cabal.cli``: the same as the ``cabal`` command."""

import sys

from cabal.cli import main

sys.exit(main())
