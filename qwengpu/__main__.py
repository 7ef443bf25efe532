"""``python -m qwengpu``: the same as the ``qwengpu`` command."""

import sys

from qwengpu.cli import main

sys.exit(main())
