"""`python -m scripts.results.submission submit|check …` (cli.py)."""

import sys

from scripts.results.submission.cli import main

sys.exit(main())
