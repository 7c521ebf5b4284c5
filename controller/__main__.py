"""`python -m controller ...`: the commands, in cli.py (the image's entry point)."""

import sys

from controller.cli import main

if __name__ == "__main__":
    sys.exit(main())
