"""Test and benchmark support: what the tests, the benchmarks and the data-making scripts share, kept
out of the product package ``plugins/docverify`` (ADR 0053). Imported as ``scripts.support.*`` with the
repository root on ``sys.path`` (the Makefile's ``PYTHONPATH``, or a script's own path set-up)."""
