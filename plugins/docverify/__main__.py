import sys

from docverify.cli import main

sys.exit(main())
