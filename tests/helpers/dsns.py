"""DSNs of the test databases, rewritten: the embedded server's come through its Unix
socket (``?host=<dir>&port=<port>``), and some tests need TCP or one more parameter."""

from __future__ import annotations

import urllib.parse


def over_tcp(dsn: str) -> str:
    """The same database through TCP on 127.0.0.1 (a DSN already on TCP is kept)."""
    parts = urllib.parse.urlsplit(dsn)
    query = dict(urllib.parse.parse_qsl(parts.query))
    if not query.get("host", "").startswith("/"):
        return dsn
    del query["host"]
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = f"{userinfo}@127.0.0.1:{query.pop('port')}"
    return urllib.parse.urlunsplit(
        parts._replace(netloc=netloc, query=urllib.parse.urlencode(query))
    )


def with_parameters(dsn: str, **parameters: str) -> str:
    """The DSN with these connection parameters added to its query."""
    separator = "&" if "?" in dsn else "?"
    return dsn + separator + urllib.parse.urlencode(parameters)
