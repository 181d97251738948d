"""The ``crawler`` command (``pip install .``): Scrapy's command line for this project, from any
folder.

``scrapy`` finds its project through a ``scrapy.cfg`` in the current folder or above it, so
outside the checkout every command says "no active project". ``crawler`` names the project's
settings module itself (``SCRAPY_SETTINGS_MODULE=crawler.settings``, which Scrapy prefers to any
``scrapy.cfg``), so ``crawler crawl web -a seeds=https://example.org/`` runs the same crawl as
``scrapy crawl ...`` in the checkout, from wherever it is started. Every output of a crawl (the
index, JOBDIR, the crawl record, WARC files, reports, feeds) is a path relative to the current
folder unless a setting names another, so a crawl's files land where it was started:
``crawler -C DIR ...`` starts it in DIR instead (made if missing), as ``git -C`` or ``make -C``
do. The user's own site configs: ``-s SITES_DIR=folder``.

It lives among the commands (``COMMANDS_MODULE``) but is none: it has no ``Command`` class.
"""

from __future__ import annotations

import os
import sys

PROG = "crawler"
SETTINGS_MODULE = "crawler.settings"


def main(argv: list[str] | None = None) -> None:
    """Run one Scrapy command of the project; exits with the command's status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["-C"]:
        if len(args) < 2:
            sys.exit(f"{PROG}: -C needs a folder: {PROG} -C DIR <command> ...")
        folder = os.path.expanduser(args[1])
        try:
            os.makedirs(folder, exist_ok=True)
            os.chdir(folder)
        except OSError as exc:
            sys.exit(f"{PROG}: cannot work in {folder}: {exc.strerror}")
        args = args[2:]
    # The project's settings whatever folder this runs in (another project's scrapy.cfg there
    # included): the command is this crawler's.
    os.environ["SCRAPY_SETTINGS_MODULE"] = SETTINGS_MODULE
    from scrapy.cmdline import execute  # after the environment is set: Scrapy reads it then

    execute([PROG, *args])


if __name__ == "__main__":
    main()
