"""courier.config: server lists, courier.toml, and flags > env > toml > defaults."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest
from click.testing import CliRunner

from courier import config, localstate
from courier.cli import main


def test_module_examples_hold() -> None:
    assert doctest.testmod(config).failed == 0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:7400", (("127.0.0.1", 7400),)),
        ("a.example:1,b.example:2", (("a.example", 1), ("b.example", 2))),
        (" a:1 , , b:2 ", (("a", 1), ("b", 2))),
        ("7401", (("127.0.0.1", 7401),)),
        (":7402", (("127.0.0.1", 7402),)),
    ],
)
def test_parse_servers(text: str, expected: tuple[tuple[str, int], ...]) -> None:
    assert config.parse_servers(text) == expected


@pytest.mark.parametrize("text", ["", " , ", "host:port", "host:"])
def test_parse_servers_refuses_nonsense(text: str) -> None:
    with pytest.raises(ValueError):
        config.parse_servers(text)


@pytest.mark.parametrize(
    ("dsn", "expected"),
    [
        (
            "postgresql://postgres:s3cret@127.0.0.1:5/courier",
            "postgresql://postgres:***@127.0.0.1:5/courier",
        ),
        (
            "postgresql://u:p%40ss@db.example/x?sslmode=require",
            "postgresql://u:***@db.example/x?sslmode=require",
        ),
        (
            "postgresql://u@h/x?password=s3cret&sslmode=require",
            "postgresql://u@h/x?password=***&sslmode=require",
        ),
        ("postgresql://postgres@127.0.0.1:5/courier", "postgresql://postgres@127.0.0.1:5/courier"),
    ],
)
def test_redact_dsn_masks_the_password(dsn: str, expected: str) -> None:
    assert config.redact_dsn(dsn) == expected


def test_load_toml_reads_the_given_file(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    path.write_text('[serve]\nport = 7401\n\n[db.url]\ndata_dir = "/srv/pg"\n')
    assert config.load_toml(path) == {
        "serve": {"port": 7401},
        "db": {"url": {"data_dir": "/srv/pg"}},
    }


def test_load_toml_defaults_to_courier_toml_in_the_working_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert config.load_toml(None) == {}
    (tmp_path / "courier.toml").write_text("[serve]\nmax_clients = 9\n")
    assert config.load_toml(None) == {"serve": {"max_clients": 9}}


def test_missing_file_is_empty(tmp_path: Path) -> None:
    assert config.load_toml(tmp_path / "absent.toml") == {}


def test_default_data_dir_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert localstate.data_dir() == tmp_path / "courier"
    monkeypatch.delenv("XDG_DATA_HOME")
    assert localstate.data_dir() == Path.home() / ".local" / "share" / "courier"
    assert localstate.data_dir(tmp_path / "given") == tmp_path / "given"


def test_settings_are_frozen_values() -> None:
    settings = config.ServerSettings(port=7001)
    assert settings == config.ServerSettings(port=7001)
    assert settings != config.ServerSettings(port=7002)
    assert "port=7001" in repr(settings)
    assert settings.limits.max_body_bytes == 64 * 1024
    with pytest.raises(AttributeError):
        settings.port = 1  # type: ignore[misc]


class TestPrecedence:
    """flags > COURIER_* environment > courier.toml > defaults, seen through `courier db url`.

    With no database cluster there, `db url` fails naming the data dir it chose.
    """

    def chosen_data_dir(self, tmp_path: Path, *args: str, env: dict[str, str]) -> str:
        toml = tmp_path / "courier.toml"
        toml.write_text(f'[db.url]\ndata_dir = "{tmp_path / "from-toml"}"\n')
        result = CliRunner().invoke(main.cli, ["--config", str(toml), "db", "url", *args], env=env)
        assert result.exit_code == 1
        return result.output

    def test_flag_beats_everything(self, tmp_path: Path) -> None:
        output = self.chosen_data_dir(
            tmp_path,
            "--data-dir",
            str(tmp_path / "from-flag"),
            env={"COURIER_DATA_DIR": str(tmp_path / "from-env")},
        )
        assert "from-flag" in output

    def test_environment_beats_the_file(self, tmp_path: Path) -> None:
        output = self.chosen_data_dir(
            tmp_path, env={"COURIER_DATA_DIR": str(tmp_path / "from-env")}
        )
        assert "from-env" in output

    def test_file_beats_the_default(self, tmp_path: Path) -> None:
        output = self.chosen_data_dir(tmp_path, env={"COURIER_DATA_DIR": ""})
        assert "from-toml" in output

    def test_default_without_anything(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
        monkeypatch.chdir(tmp_path)
        result = CliRunner().invoke(main.cli, ["db", "url"], env={"COURIER_DATA_DIR": ""})
        assert str(tmp_path / "xdg" / "courier" / "pg") in result.output


class TestFrameTimeout:
    """`courier serve --frame-timeout`, also COURIER_SERVE_FRAME_TIMEOUT, reaches the settings."""

    def served_settings(
        self, monkeypatch: pytest.MonkeyPatch, args: list[str], env: dict[str, str]
    ) -> config.ServerSettings:
        from courier.cli import serve

        served: list[config.ServerSettings] = []
        monkeypatch.setattr(serve, "run", served.append)
        result = CliRunner().invoke(main.cli, ["serve", "--mock", *args], env=env)
        assert result.exit_code == 0, result.output
        return served[0]

    def test_default(self, monkeypatch: pytest.MonkeyPatch) -> None:
        settings = self.served_settings(monkeypatch, [], {"COURIER_SERVE_FRAME_TIMEOUT": ""})
        assert settings.frame_timeout == config.DEFAULT_FRAME_TIMEOUT == 10.0

    def test_flag_beats_environment(self, monkeypatch: pytest.MonkeyPatch) -> None:
        env = {"COURIER_SERVE_FRAME_TIMEOUT": "3"}
        assert self.served_settings(monkeypatch, [], env).frame_timeout == 3.0
        flagged = self.served_settings(monkeypatch, ["--frame-timeout", "0.25"], env)
        assert flagged.frame_timeout == 0.25

    def test_must_be_positive(self) -> None:
        result = CliRunner().invoke(main.cli, ["serve", "--mock", "--frame-timeout", "0"])
        assert result.exit_code == 2 and "--frame-timeout" in result.output
