import sys

from specgen.gen.cli.commands import main

sys.exit(main())
