"""Self-checks of the numpy reference model (tests/reference/selftest.py); needs no C++."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))

import selftest  # noqa: E402

if __name__ == "__main__":
    sys.exit(selftest.main())
