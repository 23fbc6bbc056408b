"""The experiment matrix and its execution: which runs exist, what they cost, and running them.

`python -m run.sweep --scale P --exp E` runs the missing runs of experiments; `python -m
run.sweep.plan` prices them; `python -m run.sweep.matrix --check` validates the matrix.
"""
