import sys

from wmsuite.cli import main

sys.exit(main())
