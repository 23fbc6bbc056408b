"""`python -m run.llm.data --rows 500`: make the data files, print the subsets' token counts."""

import sys

from run.llm.data.tokens import main

sys.exit(main())
