"""Put the repository root on sys.path so tests (and the ranks they start) import `examples`."""

import os
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
