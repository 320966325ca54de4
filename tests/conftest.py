"""The repository's own tests. This folder is on ``sys.path`` so that one test module reuses
another's readers (the plugin guide's test reads tables and routes as ``test_docs`` does)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
