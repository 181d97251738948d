"""The spiders: the loader (one spider per site config), the site spider, and what a spider
uses to hand a page's links to the frontier."""
