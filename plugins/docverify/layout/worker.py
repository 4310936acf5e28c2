"""Entry point of a parse worker process: ``python -m docverify.layout.worker MODULE:FUNCTION``."""

import sys

from docverify.layout.pool import worker_main

if __name__ == "__main__":
    worker_main(sys.argv[1])
