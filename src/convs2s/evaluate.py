"""``python -m convs2s.evaluate`` (also the console script ``convs2s-evaluate``): the command line
of :mod:`convs2s.run.evaluate`, which holds the code."""

import sys

from convs2s.system.signals import import_command

# Ctrl-C or SIGTERM while torch loads: one line, as later
main = import_command("convs2s.run.evaluate")

if __name__ == "__main__":
    sys.exit(main())
