"""`python -m scripts.plan`: write a plan file (scripts/plan/planfile.py), the command the workflows and clusters
use."""

import sys

from scripts.plan.planfile import main

sys.exit(main())
