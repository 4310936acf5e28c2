"""One document's verification (:mod:`docverify.pipeline.document`), its retry loop and the fixers
the loop applies."""
