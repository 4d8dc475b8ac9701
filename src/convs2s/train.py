"""``python -m convs2s.train`` (also the console script ``convs2s-train``): the command line
of :mod:`convs2s.run.train`, which holds the code."""

import sys

try:
    from convs2s.run.train import main
except KeyboardInterrupt:  # Ctrl-C while torch loads: one line, as Ctrl-C later gives
    sys.stderr.write("interrupted.\n")
    sys.exit(130)

if __name__ == "__main__":
    sys.exit(main())
