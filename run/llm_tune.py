"""`python -m run.llm_tune` moved to `python -m run.llm.tune`; this name forwards to it until the next release.

It is a door, not a module: it defines nothing to import.
"""

import runpy

if __name__ == "__main__":
    runpy.run_module("run.llm.tune", run_name="__main__", alter_sys=True)
