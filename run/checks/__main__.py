"""`python -m run.checks` (`make gpu-check`): every GPU code path at tiny scale, each asserted."""

import sys

from run.checks.runner import main

if __name__ == "__main__":
    sys.exit(main())
