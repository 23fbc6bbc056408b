"""`torchrun ... -m run.vision --spec RUN/spec.json --run-dir RUN`: one rank of a vision run."""

import os
import sys

from run.vision.train import main

if __name__ == "__main__":
    code = main()
    # Everything is written (atomically) and the process group is gone. A gloo rank on CPU
    # sometimes aborts in C++ teardown after that, with no Python frame left ("terminate called
    # without an active exception", about 1 run in 15 on 2 busy cores, seen before issue 20 too),
    # which would turn a finished run into a failed one: leave without the C++ destructors.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
