"""For scrapyd: ``scrapyd-deploy`` builds the project's egg by running this file.

The packaging itself is in ``pyproject.toml`` (what ``pip install .`` reads too); this file only
lets ``python setup.py bdist_egg`` run. It is committed on purpose: without it,
``scrapyd-deploy`` writes its own ``setup.py`` into the working tree, and that generated one
packs Python modules only: the site configs in ``crawler/sites/*.toml`` (and any seeds files
next to them) would be missing from the egg, so scrapyd would list no spiders (and ``scrapy
report`` would have no page template). The build still writes ``build/`` and
``mercator_crawler.egg-info/``, which ``.gitignore`` ignores.

Dependencies are not bundled in the egg (scrapyd's environment installs ``requirements.txt``).
"""

from setuptools import setup

setup()
