"""`python -m analysis TARGET --scale P`: build one artifact (see analysis/driver.py)."""

import sys

from analysis.driver import main

sys.exit(main())
