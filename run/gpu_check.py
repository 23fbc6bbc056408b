"""`python -m run.gpu_check` moved to `python -m run.checks`; this name forwards to it until the next release.

It is a door, not a module: it defines nothing to import.
"""

import runpy

if __name__ == "__main__":
    runpy.run_module("run.checks", run_name="__main__", alter_sys=True)
