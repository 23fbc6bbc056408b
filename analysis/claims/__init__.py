"""One engine for every claim of the papers: `reference/paper/claims.yaml` is the data.

A claim names its artifact's experiment, the paper's statement, a criterion in words and a rule
over *quantities* read from the artifact's tidy table. The engine is four modules, each importing
only those before it:

    spec        the claims file: its vocabulary, loading, the check of every entry's fields
    quantities  the numbers a rule reads from a table (median and min-max over repeats), and
                how they are written for people
    rules       one judge per rule shape, each giving an Outcome: facts, values, pass or fail
    verdicts    the verdict on one claim (gates, the paper's own numbers, coverage): `judge`

The same engine judges the paper's own numbers (the artifact's `paper()` table): that is the
self-check, and it supplies the paper's values and ranges shown beside ours.
"""
