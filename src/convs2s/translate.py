"""``python -m convs2s.translate`` (also the console script ``convs2s-translate``): the command line
of :mod:`convs2s.run.translate_cli`, which holds the code."""

import sys

try:
    from convs2s.run.translate_cli import main
except KeyboardInterrupt:  # Ctrl-C while torch loads: one line, as Ctrl-C later gives
    sys.stderr.write("interrupted.\n")
    sys.exit(130)

if __name__ == "__main__":
    sys.exit(main())
