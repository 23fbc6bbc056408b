"""The experiment matrix and its execution: which runs exist, what they cost, and running them."""
