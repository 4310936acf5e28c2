"""A parse function run inside a parse worker that reports the worker's address-space limit."""

import resource

from docverify.layout.errors import ParseError


def report_rlimit(path, **_kw):
    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    raise ParseError("UNSUPPORTED", f"RLIMIT_AS={soft}", str(path))


def memory_bomb_or_pid(path, **_kw):
    """A MemoryError for a file named ``bomb*``; for any other file, the worker's pid as the error."""
    import os
    import pathlib

    if pathlib.Path(path).name.startswith("bomb"):
        raise MemoryError
    raise ParseError("UNSUPPORTED", f"pid={os.getpid()}", str(path))
