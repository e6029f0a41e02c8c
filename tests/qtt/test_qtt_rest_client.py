"""The REST runner's client on a streamed /query answer: a slow start and a quiet stream.

The stand-in server is the standard library's, in this process: it answers /query after a
delay longer than the client's timeout (as a server does while its push query starts), then
sends the header, stays quiet for longer than the timeout, and sends a row.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from qtt.rest.client import RestClient
from tests.stand_in import QuietHandler, standing_in

HEADER = b'[{"header":{"queryId":"q1","schema":"`ID` INTEGER"}},\n'
ROW = b'{"row":{"columns":[7]}},\n'


@pytest.fixture
def slow_push_server() -> Iterator[str]:
    class Handler(QuietHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self.request_body()
            time.sleep(1.5)  # the push query starting: longer than the client's timeout
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part, pause in ((HEADER, 1.5), (ROW, 0.0)):  # a quiet stream, then a row
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                self.wfile.flush()
                time.sleep(pause)
            time.sleep(5)  # the query goes on; the client closes it

    with standing_in(Handler) as url:
        yield url


def test_a_push_query_slower_to_start_than_the_timeout_and_quiet_for_longer_still_streams(
    slow_push_server: str,
) -> None:
    client = RestClient(slow_push_server, timeout=1.0)
    with client.query("SELECT * FROM S EMIT CHANGES;", {}) as stream:
        assert stream.status == 200
        assert stream.wait(lambda messages: len(messages) >= 2, timeout=10)
        assert stream.failure is None
        assert stream.messages()[1] == {"row": {"columns": [7]}}
