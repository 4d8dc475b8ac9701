"""``python -m convs2s.train`` (also the console script ``convs2s-train``): the command line
of :mod:`convs2s.run.train`, which holds the code."""

import sys

from convs2s.system.signals import import_command

# Ctrl-C or SIGTERM while torch loads: one line, as later
main = import_command("convs2s.run.train")

if __name__ == "__main__":
    sys.exit(main())
