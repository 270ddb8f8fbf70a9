"""The helpers every server test stands on (tests/servers.py)."""

from __future__ import annotations

import subprocess
import sys
import tempfile

from tests.servers import tail

LINES = 2000


def test_reading_a_servers_log_while_it_writes_loses_none_of_it() -> None:
    """The server writes its log through the open file the test reads. Reading it by moving that file's
    offset (seek, read) once made the server write over the log's beginning: a line the test waited for
    never appeared (tests/web/test_server_limits.py waited ten seconds for one)."""
    writer = f"import sys\nfor i in range({LINES}): print(f'line {{i:05d}}', flush=True)"
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen([sys.executable, "-c", writer], stdout=log)
        while proc.poll() is None:
            tail(log, chars=100)
        assert proc.wait() == 0
        assert tail(log, chars=10**6).splitlines() == [f"line {i:05d}" for i in range(LINES)]
