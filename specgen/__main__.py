"""``python -m specgen``: the ``specgen`` command (:func:`gen.cli.main`)."""

import sys

from gen.cli import main

sys.exit(main())
