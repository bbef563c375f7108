"""The exit statuses of ``cabal`` (the README has the table): one place, so scripts can rely on them."""

DONE = 0            # the command did what was asked; a mission ended done
FAILED = 1          # a command could not do what was asked; a mission failed, or a replay diverged
USAGE = 2           # the arguments, a file or the environment are wrong, or a running mission refuses (nothing ran)
HALTED = 3          # the mission waits for an answer: `cabal chat ID` or `cabal resume ID --answer`
FAILED_TURNS = 4    # the mission ended done, but some turns failed (their problems are in the report)
INTERRUPTED = 5     # the mission paused (provider outage, stop, kill): `cabal resume ID` continues it
CTRL_C = 130        # the user pressed Ctrl-C (128 + SIGINT)
CLOSED_PIPE = 141   # the reader of the output went away (128 + SIGPIPE)
