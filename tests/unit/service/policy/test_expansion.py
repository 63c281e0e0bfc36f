"""`${NAME}` in a config file expands only what SUSTAIN_CONFIG_ENV lists, and never sustain's own,
database or secret variables: whoever may edit the file must not read the service's
credentials through a label, a model name or a URL. Refusals name the variable, never its
value."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import SecretStr, ValidationError

from sustain.probes.client.secret_policy import SecretPolicy
from sustain.service.config import Settings
from sustain.service.config_file.load import parse
from sustain.service.config_file.yaml_lines import ConfigError
from sustain.service.policy.expansion import ExpansionPolicy

ADMIN = "sk_sustain_GkpUulWzwJXiwbGA4XlqVJhAstehuU53ztfrvFLoLuk"
"""A fixed key printed once by `sustain keys generate`."""
DB_URL = "postgresql://sustain:pg-pass-42@db:5432/sustain"

LABELLED = """\
version: 1
endpoints:
  - name: sim
    base_url: http://127.0.0.1:9/v1
    model: m
    labels: {owner: "${OWNER}"}
"""


def settings(**fields: Any) -> Settings:
    return Settings(**{"admin_key": SecretStr(ADMIN), "database_url": DB_URL, **fields})


def refusals(text: str, environ: dict[str, str], expandable: ExpansionPolicy) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse(text, "sustain.yaml", environ, expandable=expandable)
    return caught.value.lines()


# --- the policy, a pure value ---

def test_by_default_no_variable_expands() -> None:
    assert ExpansionPolicy().refusal("HOME", {"HOME": "/root"}) == "not in SUSTAIN_CONFIG_ENV"


@pytest.mark.parametrize("name", ["SUSTAIN_ADMIN_KEY", "SUSTAIN_DATABASE_URL", "SUSTAIN_X",
                                  "DATABASE_URL", "MY_DATABASE_URL_RO", "PGPASSWORD",
                                  "POSTGRES_PASSWORD"])
def test_own_and_database_variables_never_expand_whatever_the_globs(name: str) -> None:
    reason = ExpansionPolicy(("*",)).refusal(name, {})
    assert reason is not None
    assert "never expanded" in reason


def test_names_and_globs_are_case_sensitive_fnmatch() -> None:
    policy = ExpansionPolicy(("REGION", "LLM_*"))
    assert policy.refusal("REGION", {}) is None
    assert policy.refusal("LLM_MODEL", {}) is None
    assert policy.refusal("region", {}) == "not in SUSTAIN_CONFIG_ENV"
    assert policy.refusal("REGIONS", {}) == "not in SUSTAIN_CONFIG_ENV"


def test_a_variable_sustain_secret_env_allows_never_expands() -> None:
    policy = settings(config_env="*", secret_env="OPENAI_*").config_expansion()
    reason = policy.refusal("OPENAI_API_KEY", {"OPENAI_API_KEY": "sk-live"})
    assert reason is not None
    assert "SUSTAIN_SECRET_ENV" in reason
    assert "sk-live" not in reason
    assert policy.refusal("REGION", {"REGION": "eu"}) is None


@pytest.mark.parametrize("value", [ADMIN, DB_URL, "pg-pass-42", f" {ADMIN}\n"])
def test_a_variable_holding_one_of_sustain_s_credentials_never_expands(value: str) -> None:
    policy = settings(config_env="*").config_expansion()
    assert policy.refusal("COPY", {"COPY": value}) == \
        "the variable holds one of sustain's own credentials"


def test_the_database_url_in_use_is_a_credential_even_when_not_configured() -> None:
    embedded = "postgresql://postgres:embedded-pw@127.0.0.1:5999/sustain"
    policy = Settings(config_env="*").config_expansion(embedded)
    assert policy.refusal("COPY", {"COPY": "embedded-pw"}) is not None


def test_a_bad_sustain_config_env_entry_is_a_settings_error() -> None:
    with pytest.raises(ValidationError, match="config_env"):
        Settings(config_env="REGION,bad name")


# --- the policy applied to a file ---

def test_config_cannot_expand_admin_key() -> None:
    text = LABELLED.replace("OWNER", "SUSTAIN_ADMIN_KEY")
    environ = {"SUSTAIN_ADMIN_KEY": ADMIN}
    lines = refusals(text, environ, settings(config_env="*").config_expansion())
    assert lines == [
        "sustain.yaml:6: endpoints[0].labels.owner: environment variable SUSTAIN_ADMIN_KEY "
        "may not be expanded: sustain's own and database variables (SUSTAIN_*, "
        "*DATABASE_URL*, PG*, POSTGRES_*) are never expanded"]
    assert all(ADMIN not in line and ADMIN[len("sk_sustain_"):] not in line
               for line in lines)


def test_config_cannot_expand_a_variable_holding_the_admin_key() -> None:
    lines = refusals(LABELLED, {"OWNER": ADMIN}, settings(config_env="OWNER").config_expansion())
    assert lines == ["sustain.yaml:6: endpoints[0].labels.owner: environment variable OWNER "
                     "may not be expanded: the variable holds one of sustain's own credentials"]
    assert ADMIN not in "\n".join(lines)


def test_an_allowed_variable_expands() -> None:
    config, _ = parse(LABELLED, "sustain.yaml", {"OWNER": "inference"},
                      expandable=settings(config_env="OWN*").config_expansion())
    assert config.endpoints[0].labels == {"owner": "inference"}


def test_a_secret_env_variable_is_refused_even_when_config_env_allows_every_name() -> None:
    text = LABELLED.replace("${OWNER}", "x-${OPENAI_API_KEY}")
    policy = settings(config_env="*", secret_env="OPENAI_API_KEY").config_expansion()
    lines = refusals(text, {"OPENAI_API_KEY": "sk-live-secret"}, policy)
    assert len(lines) == 1
    assert lines[0].startswith("sustain.yaml:6: endpoints[0].labels.owner: environment "
                               "variable OPENAI_API_KEY may not be expanded: SUSTAIN_SECRET_ENV")
    assert "sk-live-secret" not in lines[0]


def test_an_unlisted_variable_is_an_error_on_its_line_and_nothing_expands() -> None:
    text = LABELLED.replace('model: m', 'model: "x-${ANY_VAR}"')
    lines = refusals(text, {"ANY_VAR": "value", "OWNER": "o"}, ExpansionPolicy(("OWNER",)))
    assert lines == ["sustain.yaml:5: endpoints[0].model: environment variable ANY_VAR may not "
                     "be expanded: not in SUSTAIN_CONFIG_ENV"]


def test_a_default_does_not_make_a_refused_name_acceptable() -> None:
    """The name is what is refused: `${SUSTAIN_ADMIN_KEY:-x}` would read the key wherever it
    is set, so it is an error whether or not the variable is set."""
    text = LABELLED.replace("${OWNER}", "${SUSTAIN_ADMIN_KEY:-nobody}")
    policy = ExpansionPolicy(("*",), SecretPolicy())
    for environ in ({}, {"SUSTAIN_ADMIN_KEY": ADMIN}):
        (line,) = refusals(text, environ, policy)
        assert "environment variable SUSTAIN_ADMIN_KEY may not be expanded" in line
    unlisted = LABELLED.replace("${OWNER}", "${TEAM:-nobody}")
    (line,) = refusals(unlisted, {}, ExpansionPolicy())
    assert line.endswith("environment variable TEAM may not be expanded: not in "
                         "SUSTAIN_CONFIG_ENV")


# --- containment: a credential inside a value, not only the whole value ---

@pytest.mark.parametrize(("owner", "environ"), [
    ("x-${OWNER}-y", {"OWNER": f"team-{ADMIN}"}),  # the variable contains the key
    ("x-${HALF_A}${HALF_B}-y", {"HALF_A": ADMIN[:25], "HALF_B": ADMIN[25:]}),  # halves join
    ("postgresql://u:${PW}@db/x", {"PW": "pg-pass-42"}),  # a URL with the password inside
])
def test_a_value_containing_a_credential_once_expanded_is_refused_by_field_not_value(
        owner: str, environ: dict[str, str]) -> None:
    text = LABELLED.replace("${OWNER}", owner)
    lines = refusals(text, environ, settings(config_env="*").config_expansion())
    assert len(lines) == 1
    assert lines[0].startswith("sustain.yaml:6: endpoints[0].labels.owner: ")
    assert "holds one of sustain's own credentials" in lines[0]
    assert all(secret not in lines[0]
               for secret in (ADMIN, ADMIN[:25], ADMIN[25:], "pg-pass-42"))


def test_the_refusal_of_an_expanded_value_names_its_variables() -> None:
    text = LABELLED.replace("${OWNER}", "${HALF_A}${HALF_B}")
    (line,) = refusals(text, {"HALF_A": ADMIN[:25], "HALF_B": ADMIN[25:]},
                       settings(config_env="*").config_expansion())
    assert line == ("sustain.yaml:6: endpoints[0].labels.owner: the value holds one of "
                    "sustain's own credentials (expanded from HALF_A, HALF_B); not stored, "
                    "not shown")


def test_a_value_written_with_a_credential_inside_is_refused_too() -> None:
    text = LABELLED.replace("${OWNER}", f"copied-{ADMIN}")
    (line,) = refusals(text, {}, settings().config_expansion())
    assert line.startswith("sustain.yaml:6: endpoints[0].labels.owner: the value holds one of ")
    assert ADMIN not in line


def test_a_short_database_password_does_not_forbid_values_that_merely_contain_it() -> None:
    short = "postgresql://sustain:sustain@db:5432/sustain"
    expandable = Settings(config_env="*", database_url=short).config_expansion()
    text = LABELLED.replace("${OWNER}", "sustain-${TEAM}")
    config, _ = parse(text, "sustain.yaml", {"TEAM": "platform"}, expandable=expandable)
    assert config.endpoints[0].labels == {"owner": "sustain-platform"}
    assert expandable.refusal("TEAM", {"TEAM": "sustain"}) is not None  # the whole value is
