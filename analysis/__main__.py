"""`python -m analysis TARGET --profile P`: build one artifact (see analysis/driver.py)."""

import sys

from analysis.driver import main

sys.exit(main())
