"""Packaging for scrapyd: ``scrapyd-deploy`` builds the project's egg from this file.

It is committed on purpose. Without it, ``scrapyd-deploy`` writes its own ``setup.py`` into the
working tree, and that generated one packs Python modules only: the site configs in
``crawler/sites/*.toml`` (and any seeds files next to them) would be missing from the egg, so
scrapyd would list no spiders (and ``scrapy report`` would have no page template). The build itself still writes ``build/`` and
``crawler.egg-info/``, which ``.gitignore`` ignores.

Only the ``crawler`` package is packed: ``devsite`` (the test site, the demo and the labelled
near-duplicate set), ``tests`` and ``bench`` are never imported by a crawl, so they stay out of
production (``tests/test_packaging.py`` checks the egg).
Dependencies are not bundled (scrapyd's environment provides Scrapy and ``requirements.txt``).
"""

from setuptools import find_packages, setup

setup(
    name="crawler",
    version="0.1",
    packages=find_packages(include=["crawler", "crawler.*"]),
    # Site configs are data, not modules. A relative ``seeds_file`` in a config is resolved
    # against the sites folder, so seeds files kept there must travel too.
    # The report's page template travels with the code that fills it.
    package_data={
        "crawler.sites": ["*.toml", "*.txt", "seeds/*.txt"],
        "crawler.report": ["templates/*.html"],
    },
    # Only the files named above: nothing picked up from a MANIFEST.in or version control.
    include_package_data=False,
    # How scrapyd's runner finds the settings module of an egg (``activate_egg``).
    entry_points={"scrapy": ["settings = crawler.settings"]},
    python_requires=">=3.11",
)
