"""The crawler's own scrapy commands (``COMMANDS_MODULE``), and what they share."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

_Run = TypeVar("_Run", bound=Callable[..., None])


def pipe_safe(run: _Run) -> _Run:
    """A command's ``run`` whose reader may go away: ``scrapy search ... | head`` closes the
    pipe after ten lines, and Python would end with a BrokenPipeError traceback (and another
    when it flushes stdout at exit). The output simply stops, as for any Unix tool."""

    @functools.wraps(run)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        try:
            run(*args, **kwargs)
            sys.stdout.flush()
        except BrokenPipeError:
            # stdout's remaining buffer would raise again at exit: point it at /dev/null
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)

    return wrapper  # type: ignore[return-value]
