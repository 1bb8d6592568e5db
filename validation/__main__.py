"""`python -m validation INVENTORY` (what `./dbzfs validate` runs)."""

import sys

from validation import main

sys.exit(main(sys.argv[1:]))
