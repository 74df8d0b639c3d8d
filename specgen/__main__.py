"""``python -m specgen``: the ``specgen`` command (:func:`gen.cli.commands.main`)."""

import sys

from gen.cli.commands import main

sys.exit(main())
