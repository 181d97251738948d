"""Which addresses the crawler refuses to fetch by default."""

from __future__ import annotations

import pytest
from scrapy.settings import Settings
from twisted.internet.address import IPv4Address

from crawler.download.handler import _LimitedFactory
from crawler.middlewares.address_safety import unsafe_reason
from crawler.net.addresses import AddressPolicy, policy_from_settings


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


# --- the allowlist -----------------------------------------------------------------------------


def test_an_allowlist_allows_just_its_networks_and_ports() -> None:
    policy = AddressPolicy.from_values(False, ["127.0.0.2/32:8080", "10.20.0.0/16", "[::1]:443"])
    assert policy.refusal("127.0.0.2", 8080) == ""
    assert policy.refusal("127.0.0.2", 8081) == "loopback"  # another port of the same host
    assert policy.refusal("127.0.0.3", 8080) == "loopback"  # another loopback host
    assert policy.refusal("10.20.255.1", 22) == ""  # a network without a port: every port
    assert policy.refusal("10.21.0.1", 80) == "private"
    assert policy.refusal("169.254.169.254", 80)  # the metadata address stays refused
    assert policy.refusal("::1", 443) == "" and policy.refusal("::1", 80) == "loopback"
    assert policy.refusal("::ffff:10.20.0.5", 80) == ""  # judged by the IPv4 address it carries
    assert policy.refusal("8.8.8.8", 80) == ""
    assert AddressPolicy.from_values(True, []).refusal("10.0.0.1", 80) == ""


@pytest.mark.parametrize("entry", ["10.0.0.0/33", "localhost", "10.0.0.1:99999", "[::1]x"])
def test_a_malformed_allowlist_entry_is_an_error_naming_it(entry: str) -> None:
    settings = Settings({"ALLOWED_NETWORKS": [entry]})
    with pytest.raises(ValueError, match="ALLOWED_NETWORKS: "):
        policy_from_settings(settings)


def test_the_connection_itself_is_checked() -> None:
    """The handler judges the address it connects to (a name may resolve differently for the
    middleware and for the connection): a refused address gets no protocol, so nothing is
    sent on it."""
    refused: list[tuple[str, int | None, str]] = []
    factory_class = type(
        "Factory",
        (_LimitedFactory,),
        {"policy": AddressPolicy(), "on_refused": staticmethod(lambda *a: refused.append(a))},
    )
    factory = factory_class(lambda protocol: None, metadata=None)
    assert factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", 80)) is None
    assert refused == [("127.0.0.1", 80, "loopback")]
    assert factory.buildProtocol(IPv4Address("TCP", "8.8.8.8", 80)) is not None
