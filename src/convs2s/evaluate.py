"""``python -m convs2s.evaluate`` (also the console script ``convs2s-evaluate``): the command line
of :mod:`convs2s.run.evaluate`, which holds the code."""

import sys

from convs2s.run.evaluate import main

if __name__ == "__main__":
    sys.exit(main())
