"""Files only this user may read, replaced whole."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_private(path: Path, text: str) -> None:
    """Put ``text`` in ``path`` (mode 0600) whole: a reader sees the old file or the
    new one, never half of either. The temporary file gets a random name and is
    created exclusively, so nobody else can have made it first to read the secret."""
    descriptor, partial = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(descriptor, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(partial, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(partial)
        raise
