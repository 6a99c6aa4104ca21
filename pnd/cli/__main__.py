"""`python -m pnd.cli ...` runs the `pnd` command, as launchers need (`torchrun -m pnd.cli caption ...`)."""

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
