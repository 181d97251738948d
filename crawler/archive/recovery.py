"""Finishing the ``.open`` files of a worker that was killed: cut each after its last whole
record and give it its final name, so an archive never has to handle a half file.

A file is recovered only by a worker of the same host whose writer process is gone (the host
and pid are in the name: ``naming``), so two workers never touch one another's open file. Each
record is one gzip member: the last whole member is found by decompressing the file once,
member by member, in chunks (memory stays small for a 1 GB file).
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path

from crawler.archive.naming import OPEN_SUFFIX, WARC_SUFFIX, safe_part

_CHUNK = 1 << 20


def whole_members_end(path: Path) -> int:
    """The offset just past the last complete gzip member of ``path``."""
    end = 0  # end of the last whole member
    position = 0  # bytes of the file consumed by finished members and the current one
    member = zlib.decompressobj(31)
    with path.open("rb") as fh:
        pending = b""
        while True:
            data = pending or fh.read(_CHUNK)
            pending = b""
            if not data:
                return end
            try:
                member.decompress(data)
            except zlib.error:
                return end  # corrupt from here on
            if member.eof:
                used = len(data) - len(member.unused_data)
                position += used
                end = position
                pending = member.unused_data
                member = zlib.decompressobj(31)
                if not pending:
                    continue
            else:
                position += len(data)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def recover_open_files(directory: str | os.PathLike[str], host: str) -> list[Path]:
    """Cut and rename the ``.open`` files of dead writers of ``host`` in ``directory``; the
    files finished this way."""
    host = safe_part(host)
    done = []
    for path in sorted(Path(directory).glob("*" + WARC_SUFFIX + OPEN_SUFFIX)):
        stem = path.name[: -len(WARC_SUFFIX + OPEN_SUFFIX)]
        parts = stem.rsplit("-", 2)
        if len(parts) != 3 or parts[1] != host or not parts[2].isdigit():
            continue
        if _pid_alive(int(parts[2])):
            continue
        end = whole_members_end(path)
        final = path.with_name(path.name[: -len(OPEN_SUFFIX)])
        if end == 0:
            path.unlink()  # not even its warcinfo was whole
            continue
        with path.open("r+b") as fh:
            fh.truncate(end)
        os.replace(path, final)
        done.append(final)
    return done
