"""`make assets` (`python -m run.assets`): fetch what the quick and paper scales need."""
