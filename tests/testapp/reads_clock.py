"""A module that reads the clock while it is imported (as some libraries do)."""

import time

LOADED_AT = time.time()


def stamp() -> float:
    """A helper that reads the clock, called from a body in another module."""
    return time.time()
