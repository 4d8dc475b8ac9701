"""``python -m convs2s.train`` (also the console script ``convs2s-train``): the command line of
:mod:`convs2s.run.train`, which holds the code."""

import sys

from convs2s.run.train import main

if __name__ == "__main__":
    sys.exit(main())
