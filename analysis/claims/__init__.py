"""One engine for every claim of the papers: `reference/paper/claims.yaml` is the data.

A claim is a rule over quantities of its artifact's tidy table. The modules import only those
before them: spec, quantities, outcome, rules, verdicts (`judge`). The same engine judges the
paper's own numbers (the artifact's `paper()` table): the self-check, and the paper's values and
ranges shown beside ours.
"""
