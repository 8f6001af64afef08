"""Identifiers for servers, tools and parameters: safe, snake_case, stable, de-duplicated."""

from __future__ import annotations

import keyword

import pytest

from codemode.stubs.naming import assign_names, class_name, identifier, parameter_names


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("GetAccountsAccount", "get_accounts_account"),
        ("repos/get-branch", "repos_get_branch"),
        ("zone.settings.get", "zone_settings_get"),
        ("getURLForID", "get_url_for_id"),
        ("class", "class_"),
        ("None", "none"),
        ("2fa", "x_2fa"),
        ("__init__", "init"),
        ("", "x"),
        ("type", "type"),  # a soft keyword is a valid name
        ("naïve name", "na_ve_name"),
    ],
)
def test_identifier(name, expected):
    result = identifier(name)
    assert result == expected
    assert result.isidentifier() and not keyword.iskeyword(result)


def test_class_name_is_camel_case_and_never_a_keyword():
    assert class_name("billing-address") == "BillingAddress"
    assert class_name("none") == "None_"
    assert class_name("2fa").isidentifier()


def test_collisions_are_resolved_in_sorted_order_whatever_the_input_order():
    names = ["foo-bar", "fooBar", "foo_bar"]
    first = assign_names(names)
    assert first == assign_names(list(reversed(names)))
    assert sorted(first.values()) == ["foo_bar", "foo_bar_2", "foo_bar_3"]
    assert first["foo-bar"] == "foo_bar"  # "-" sorts before "B" and "_"


def test_parameter_names_keep_the_upstream_mapping():
    mapping = parameter_names(["from", "per-page", "perPage"])
    assert mapping == {"from": "from_", "per-page": "per_page", "perPage": "per_page_2"}
