"""Allow `python -m tito ...`."""
import sys

from tito.main import main

sys.exit(main())
