"""The [privacy] table: defaults, the documented example, and a clear error for each bad value."""

from __future__ import annotations

import tomllib

import pytest

from codemode.errors import ConfigError
from codemode.privacy.detectors import BUILTIN_KINDS
from codemode.privacy.settings import PrivacySettings

EXAMPLE = r"""
[privacy]
enabled = true
detectors = ["EMAIL", "PHONE", "CARD", "IBAN", "IP", "NATIONAL_ID", "SECRET"]
patterns = { EMPLOYEE_ID = "EMP-\\d{6}" }

[privacy.fields]
crm = ["leads[].email", "*.phone"]

[privacy.flows]
crm = ["mail"]
docs = ["*"]
"*" = ["archive-*"]
"""


def test_defaults() -> None:
    settings = PrivacySettings.from_mapping({}, "codemode.toml")
    assert settings == PrivacySettings()
    assert settings.enabled
    assert settings.detectors == BUILTIN_KINDS
    assert settings.may_flow("crm", "crm")
    assert not settings.may_flow("crm", "mail")  # safe default: back to the source only


def test_the_documented_example() -> None:
    table = tomllib.loads(EXAMPLE)["privacy"]
    settings = PrivacySettings.from_mapping(table, "codemode.toml")
    assert settings.patterns == {"EMPLOYEE_ID": r"EMP-\d{6}"}
    assert settings.fields == {"crm": ("leads[].email", "*.phone")}
    assert settings.may_flow("crm", "mail")
    assert not settings.may_flow("crm", "analytics")
    assert settings.may_flow("docs", "anything")
    assert settings.may_flow("billing", "archive-eu")
    assert not settings.may_flow("billing", "mail")
    assert settings.flow_targets("crm") == (("mail",), "privacy.flows.crm")
    detectors = settings.tokenizer().detectors
    assert "UK_NINO" in detectors.kinds
    assert [d.kind for d in detectors.detect("id EMP-123456")] == ["EMPLOYEE_ID"]


def test_json_config_object_works_the_same() -> None:
    settings = PrivacySettings.from_mapping(
        {"enabled": False, "flows": {"crm": ["mail"]}}, "claude_desktop_config.json"
    )
    assert not settings.enabled
    assert settings.may_flow("crm", "mail")


@pytest.mark.parametrize(
    ("table", "key", "words"),
    [
        ({"enable": True}, "privacy.enable", "unknown key"),
        ({"enabled": "yes"}, "privacy.enabled", "true or false"),
        ({"detectors": "EMAIL"}, "privacy.detectors", "list of detector names"),
        ({"detectors": ["EMAIL", "PASSPORT"]}, "privacy.detectors[1]", "'PASSPORT'"),
        ({"patterns": ["EMP-\\d+"]}, "privacy.patterns", "table of KIND = regex"),
        ({"patterns": {"emp_id": "EMP-\\d+"}}, "privacy.patterns.emp_id", "upper-case"),
        ({"patterns": {"EMAIL": "x@y"}}, "privacy.patterns.EMAIL", "built-in"),
        ({"patterns": {"EMP": "EMP-(\\d+"}}, "privacy.patterns.EMP", "invalid regex"),
        ({"patterns": {"EMP": "\\d*"}}, "privacy.patterns.EMP", "empty string"),
        ({"patterns": {"EMP": 5}}, "privacy.patterns.EMP", "regex string"),
        ({"fields": ["crm"]}, "privacy.fields", "table of server"),
        ({"fields": {"crm": "email"}}, "privacy.fields.crm", "list of non-empty strings"),
        ({"fields": {"crm": ["a..b"]}}, "privacy.fields.crm[0]", "empty key"),
        ({"fields": {"*": ["email"]}}, 'privacy.fields."*"', "per server"),
        ({"flows": {"crm": "mail"}}, "privacy.flows.crm", "list of non-empty strings"),
        ({"flows": {"crm": [""]}}, "privacy.flows.crm[0]", "empty string"),
    ],
)
def test_bad_values_name_the_file_and_key(table: dict[str, object], key: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        PrivacySettings.from_mapping(table, "codemode.toml")
    error = caught.value
    assert error.path == "codemode.toml"
    assert error.key == key
    assert words in str(error)
    assert error.fix


def test_invalid_regex_says_why() -> None:
    with pytest.raises(ConfigError) as caught:
        PrivacySettings.from_mapping({"patterns": {"EMP": "EMP-(\\d+"}}, "c.toml")
    message = str(caught.value)
    assert "'EMP-(\\\\d+'" in message
    assert "missing )" in message
    assert "position 4" in message


def test_not_a_table() -> None:
    with pytest.raises(ConfigError, match="must be a table"):
        PrivacySettings.from_mapping(["x"], "c.toml")  # type: ignore[arg-type]


def test_oracle_table_is_read_and_checked() -> None:
    from codemode.privacy.oracle import OracleSettings

    settings = PrivacySettings.from_mapping(
        {"oracle": {"tools": ["crm.find_*"], "calls_per_minute": 5, "similar_calls": 3}}, "t"
    )
    assert settings.oracle == OracleSettings(
        tools=("crm.find_*",), calls_per_minute=5, similar_calls=3
    )
    assert PrivacySettings().oracle == OracleSettings()
    with pytest.raises(ConfigError, match=r"privacy\.oracle\.calls_per_session"):
        PrivacySettings.from_mapping({"oracle": {"calls_per_session": 0}}, "t")
    with pytest.raises(ConfigError, match=r"privacy\.oracle\.limit"):
        PrivacySettings.from_mapping({"oracle": {"limit": 3}}, "t")
