"""One module per make target, `<target with - as _>.py`, ending in `ARTIFACT = Artifact(...)`
(analysis/driver.py)."""
