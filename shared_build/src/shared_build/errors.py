"""How shared_build speaks: the one exception it raises for a build that cannot go ahead,
and the log line it prints while a build goes ahead."""

import sys


class BuildError(RuntimeError):
    """A build cannot proceed; the message is one sentence that says what to do next."""


def log(message: str) -> None:
    """One line on stderr, where pip shows a build's output."""
    print(f"shared_build: {message}", file=sys.stderr, flush=True)
