import sys

from docverify.cli import main

if __name__ == "__main__":  # Airflow's plugin loader may import this module: never run on import
    sys.exit(main())
