"""`python -m components ...`: the commands, in cli/main.py."""

import sys

from components.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
