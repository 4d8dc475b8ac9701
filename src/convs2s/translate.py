"""``python -m convs2s.translate`` (also the console script ``convs2s-translate``): the command
line of :mod:`convs2s.run.translate`, which holds the code."""

import sys

from convs2s.run.translate import main

if __name__ == "__main__":
    sys.exit(main())
