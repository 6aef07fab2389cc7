"""``python -m roofline`` runs the command line, as the ``roofline`` script does."""

import sys

from .cli import main

sys.exit(main())
