"""``python -m convs2s.evaluate`` (also the console script ``convs2s-evaluate``): the command line
of :mod:`convs2s.run.evaluate`, which holds the code."""

import sys

try:
    from convs2s.run.evaluate import main
except KeyboardInterrupt:  # Ctrl-C while torch loads: one line, as Ctrl-C later gives
    sys.stderr.write("interrupted.\n")
    sys.exit(130)

if __name__ == "__main__":
    sys.exit(main())
