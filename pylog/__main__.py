"""``python -m pylog``: the same as the ``pylog`` command."""

import sys

from pylog.cli.main import main

sys.exit(main())
