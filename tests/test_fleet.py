"""What ``scrapy frontier <site> deadline|budget`` reads from the operator: sizes and deadlines.
The controls themselves, on the partitioned frontier and a real redis-server, are tested in
test_controls.py; a dead worker's partitions taken over in test_frontier_partitioned.py."""

from __future__ import annotations

import pytest

from crawler.commands.frontier import parse_deadline, parse_size


def test_sizes_and_deadlines_parse() -> None:
    assert parse_size("500MB") == 500 << 20 and parse_size("2g") == 2 << 30
    assert parse_size("1234") == 1234
    assert parse_deadline("+90m", 0.0) == 5400 and parse_deadline("+2h", 0.0) == 7200
    with pytest.raises(ValueError):
        parse_size("lots")
    with pytest.raises(ValueError):
        parse_deadline("2000-01-01T00:00", 1e10)
