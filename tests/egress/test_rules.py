"""The allowlist's pieces without sockets: config, names, address ranges, request heads."""

from __future__ import annotations

import ipaddress

import pytest

from codemode.egress import EgressRules, NetworkSettings, Refusal
from codemode.egress.heads import (
    MAX_HEADERS,
    RequestHead,
    Target,
    forwarded_request,
    parse_request_head,
    refusal_response,
    request_target,
    rewrite_response_head,
)
from codemode.errors import ConfigError
from codemode.hostnames import is_public, split_destination
from codemode.sandbox import SandboxSettings


def test_config_table_reads_allow_and_allow_private() -> None:
    settings = SandboxSettings.from_mapping(
        {
            "network": {
                "allow": ["API.Example.com.:443", "[::1]:8080"],
                "allow_private": ["10.1.2.3"],
            }
        }
    )
    assert settings.network.enabled
    assert settings.network.allow == ("api.example.com:443", "[::1]:8080")
    assert settings.network.allow_private == ("10.1.2.3/32",)
    assert settings.network.destinations() == {("api.example.com", 443), ("::1", 8080)}
    assert not SandboxSettings().network.enabled  # no network by default


@pytest.mark.parametrize(
    ("table", "key", "words"),
    [
        ({"allow": ["example.com"]}, "sandbox.network.allow[0]", "host:port"),
        ({"allow": ["example.com:0"]}, "sandbox.network.allow[0]", "host:port"),
        ({"allow": ["exa mple.com:80"]}, "sandbox.network.allow[0]", "host:port"),
        ({"allow": [443]}, "sandbox.network.allow[0]", "'host:port' string"),
        ({"allow_private": ["10.0.0.0/33"]}, "sandbox.network.allow_private[0]", "CIDR"),
        ({"alow": ["a:1"]}, "sandbox.network.alow", "allow"),
    ],
)
def test_config_mistakes_name_the_key_and_the_fix(
    table: dict[str, object], key: str, words: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        SandboxSettings.from_mapping({"network": table})
    assert caught.value.key == key
    assert words in str(caught.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a.example:443", ("a.example", 443)),
        ("A.EXAMPLE.:80", ("a.example", 80)),
        ("[2001:db8::1]:443", ("2001:db8::1", 443)),
        ("10.0.0.1:65535", ("10.0.0.1", 65535)),
        ("2001:db8::1:443", None),  # IPv6 needs brackets
        ("a.example:99999", None),
        ("a.example:", None),
        ("-bad.example:80", None),
        ("a..example:80", None),
        ("a_b.example:80", None),
        ("user@a.example:80", None),
    ],
)
def test_destinations_parse_strictly(text: str, expected: tuple[str, int] | None) -> None:
    assert split_destination(text) == expected


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("93.184.216.34", True),
        ("2606:2800:220:1::1", True),
        ("10.1.2.3", False),
        ("172.16.0.1", False),
        ("192.168.1.1", False),
        ("127.0.0.1", False),
        ("169.254.169.254", False),
        ("100.64.0.1", False),  # shared address space (CGNAT)
        ("0.0.0.0", False),
        ("224.0.0.1", False),
        ("::1", False),
        ("fe80::1", False),
        ("fd00::1", False),
        ("::ffff:10.0.0.1", False),  # IPv4-mapped: judged as IPv4
        ("::ffff:127.0.0.1", False),
    ],
)
def test_non_global_ranges_are_not_public(address: str, public: bool) -> None:
    assert is_public(ipaddress.ip_address(address)) is public


def test_rules_admit_listed_pairs_and_private_ranges_only_when_listed() -> None:
    rules = EgressRules(
        NetworkSettings(
            allow=("api.example:443", "intra.example:80"), allow_private=("10.0.0.0/8",)
        )
    )
    assert rules.check_destination("API.example", 443) is None
    refused = rules.check_destination("api.example", 80)
    assert isinstance(refused, Refusal) and refused.status == 403
    assert '[sandbox.network] allow; to reach it, add "api.example:80"' in refused.reason
    ip = ipaddress.ip_address
    assert rules.pick("intra.example", 80, [ip("10.9.9.9")]) == ip("10.9.9.9")
    assert rules.pick("x", 80, [ip("192.168.0.1"), ip("10.1.1.1")]) == ip("10.1.1.1")
    private = rules.pick("x", 80, [ip("127.0.0.1"), ip("::ffff:192.168.0.1")])
    assert isinstance(private, Refusal) and private.code == "egress_private_address"
    assert "allow_private" in private.reason and '"127.0.0.1/32"' in private.reason
    unresolved = rules.pick("x", 80, [])
    assert isinstance(unresolved, Refusal) and unresolved.status == 502


def _head(text: str) -> RequestHead | Refusal:
    return parse_request_head(text.replace("\n", "\r\n").encode() + b"\r\n")


def test_a_connect_and_a_plain_request_name_their_targets() -> None:
    connect = _head("CONNECT api.example:443 HTTP/1.1\nHost: api.example:443\n")
    assert isinstance(connect, RequestHead)
    assert request_target(connect) == Target("api.example", 443, "")
    plain = _head("GET http://Api.Example:8080/a/b?q=1#frag HTTP/1.1\nHost: api.example:8080\n")
    assert isinstance(plain, RequestHead)
    assert request_target(plain) == Target("api.example", 8080, "/a/b?q=1")


@pytest.mark.parametrize(
    ("text", "status", "words"),
    [
        ("GET http://a.example/ HTTP/1.1\nHost: b.example\n", 400, "Host header names"),
        (
            "GET http://a.example/ HTTP/1.1\nHost: a.example\nHost: b.example\n",
            400,
            "more than one",
        ),
        ("CONNECT a.example:443 HTTP/1.1\nHost: a.example:8443\n", 400, "Host header names"),
        ("GET /relative HTTP/1.1\nHost: a.example\n", 400, "absolute http:// URL"),
        ("GET https://a.example/ HTTP/1.1\n", 400, "CONNECT"),
        ("GET http://user:pw@a.example/ HTTP/1.1\n", 400, "credentials"),
        ("GET http://a.example:99999/ HTTP/1.1\n", 400, "port"),
        ("CONNECT a.example HTTP/1.1\n", 400, "host:port"),
        ("GET http://a.example/ HTTP/2.0\n", 400, "HTTP/1.0 and HTTP/1.1 only"),
        ("GET http://a.example/ HTTP/1.1\nX: a\n folded\n", 400, "folded"),
        ("GET http://a.example/ HTTP/1.1\nX: a\x00b\n", 400, "control characters"),
        ("GET http://a.example/\tx HTTP/1.1\n", 400, "control characters"),
        ("GET  http://a.example/ HTTP/1.1\n", 400, "request line"),
    ],
)
def test_smuggling_shapes_are_refused(text: str, status: int, words: str) -> None:
    head = _head(text)
    found = head if isinstance(head, Refusal) else request_target(head)
    assert isinstance(found, Refusal), found
    assert found.status == status and words in found.reason, found


def test_too_many_headers_are_refused() -> None:
    lines = "".join(f"X-{n}: v\n" for n in range(MAX_HEADERS + 1))
    refused = _head(f"GET http://a.example/ HTTP/1.1\n{lines}")
    assert isinstance(refused, Refusal) and refused.status == 431


def test_the_forwarded_request_drops_proxy_headers_and_closes() -> None:
    head = _head(
        "POST http://a.example:8080/p HTTP/1.1\nHost: a.example:8080\n"
        "Proxy-Authorization: Basic c2VjcmV0\nConnection: keep-alive, X-Drop\nX-Drop: 1\n"
        "Keep-Alive: 5\nContent-Length: 2\nX-Keep: yes\n"
    )
    assert isinstance(head, RequestHead)
    target = request_target(head)
    assert isinstance(target, Target)
    assert forwarded_request(head, target) == (
        b"POST /p HTTP/1.1\r\nContent-Length: 2\r\nX-Keep: yes\r\n"
        b"Host: a.example:8080\r\nConnection: close\r\n\r\n"
    )


def test_a_response_head_is_closed_and_interim_heads_pass() -> None:
    rewritten = rewrite_response_head(b"HTTP/1.1 200 OK\r\nKeep-Alive: 5\r\nA: b\r\n\r\n")
    assert rewritten == (b"HTTP/1.1 200 OK\r\nA: b\r\nConnection: close\r\n\r\n", False)
    interim = b"HTTP/1.1 100 Continue\r\n\r\n"
    assert rewrite_response_head(interim) == (interim, True)
    assert rewrite_response_head(b"SSH-2.0-OpenSSH\r\n\r\n") is None


def test_a_refusal_carries_its_message_in_the_reason_phrase_and_the_body() -> None:
    answer = refusal_response(Refusal(403, "x.example:443 is not in [sandbox.network] allow", "c"))
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 403 x.example:443 is not in [sandbox.network] allow\r\n")
    assert b"Connection: close" in head
    assert body == b"codemode egress proxy: x.example:443 is not in [sandbox.network] allow\n"
