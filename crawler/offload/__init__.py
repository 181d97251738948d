"""Heavy page work off the reactor: the content, index and feed threads and the parse process
for big pages (``components``)."""
