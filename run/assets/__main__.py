"""`python -m run.assets` (`make assets`): fetch what the quick and paper scales need."""

import sys

from run.assets.fetch import main

if __name__ == "__main__":
    sys.exit(main())
