"""Files that hold secrets or sessions (the demo's SQLite database, the Celery file broker's
messages and results): readable by their owner only, in folders only their owner opens."""

from __future__ import annotations

import os
import stat
from pathlib import Path

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def private_dir(path: Path) -> Path:
    """``path`` and any missing parents made; ``path`` itself owner-only (0700), also when it
    was there already with a looser mode, if it is ours and not a shared folder such as /tmp
    (sticky bit)."""
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)
    info = path.stat()
    ours = info.st_uid == os.getuid() and not info.st_mode & stat.S_ISVTX
    if ours and stat.S_IMODE(info.st_mode) != PRIVATE_DIR_MODE:
        path.chmod(PRIVATE_DIR_MODE)
    return path


def private_file(path: Path) -> Path:
    """``path`` created empty if missing, owner-only (0600) before anything is written to it;
    an existing one is made owner-only."""
    private_dir(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, PRIVATE_FILE_MODE)
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)
    finally:
        os.close(fd)
    return path
