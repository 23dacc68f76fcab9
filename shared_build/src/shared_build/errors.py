"""The one exception shared_build raises for a build that cannot go ahead."""


class BuildError(RuntimeError):
    """A build cannot proceed; the message is one sentence that says what to do next."""
