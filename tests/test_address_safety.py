"""Which addresses the crawler refuses to fetch by default."""

from __future__ import annotations

import pytest

from crawler.middlewares.address_safety import unsafe_reason


@pytest.mark.parametrize(
    "ip",
    [
        "127.0.0.1", "127.0.0.2", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254",
        "100.100.100.200",  # carrier-grade NAT: some clouds' metadata service
        "0.0.0.0", "224.0.0.1", "240.0.0.1", "192.0.2.1",
        "::1", "fe80::1", "fc00::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1",
        "2002:7f00:1::1",  # 6to4 wrapping 127.0.0.1
        "2002:a00:1::1",  # 6to4 wrapping 10.0.0.1
    ],
)
def test_private_and_special_addresses_are_refused(ip):
    assert unsafe_reason(ip)


@pytest.mark.parametrize("ip", ["8.8.8.8", "93.184.216.34", "2606:4700::1111", "2002:808:808::1"])
def test_public_addresses_pass(ip):
    assert unsafe_reason(ip) == ""


def test_host_names_are_not_judged_here():
    assert unsafe_reason("example.org") == ""  # resolved first, by the middleware
