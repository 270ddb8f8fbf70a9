"""Performance measurement: per-request cost against /healthz, class load on one worker, growth with T.

``python -m bench`` (``make bench``) runs everything and writes bench/RESULTS.md; ``--quick`` only
proves the measurement still runs. Nothing here asserts on time: the figures are for reading.
"""

import warnings

# The page's form reader lives in the tests' conftest, which imports Starlette's TestClient; the
# same warning is silenced for pytest in pyproject.toml.
warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient` is deprecated")
