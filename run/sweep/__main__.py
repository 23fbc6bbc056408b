"""`python -m run.sweep --scale P --exp E [--exp ...]`: run the missing runs of experiments."""

import sys

from run.sweep.runner import main

if __name__ == "__main__":
    sys.exit(main())
