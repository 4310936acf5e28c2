"""A parse function run inside a parse worker that reports the worker's address-space limit."""

import resource

from docverify.layout.errors import ParseError


def report_rlimit(path, **_kw):
    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    raise ParseError("UNSUPPORTED", f"RLIMIT_AS={soft}", str(path))
