"""`python -m run.plan` moved to `python -m run.sweep.plan`; this name forwards to it until the next release.

It is a door, not a module: it defines nothing to import.
"""

import runpy

if __name__ == "__main__":
    runpy.run_module("run.sweep.plan", run_name="__main__", alter_sys=True)
