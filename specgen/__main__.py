"""``python -m specgen``: the ``specgen`` command (:func:`specgen.gen.cli.commands.main`)."""

import sys

from specgen.gen.cli.commands import main

sys.exit(main())
