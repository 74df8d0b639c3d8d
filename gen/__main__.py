import sys

from gen.cli.commands import main

sys.exit(main())
