import sys

from tools.site import cli

sys.exit(cli())
