import sys

from deployctl.cli import main

sys.exit(main())
