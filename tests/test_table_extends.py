"""``extends`` in a table file (controller/table_file.py): the shipped example tables say only what
differs from a shared base (config/tables/base/) and load exactly as they did written out whole;
a base is merged under the file (tables key by key, anything else replaced); its relative paths
stay relative to the base; a missing, cyclic or too deep chain is refused in one line naming the
file and the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from controller.appliance.cli import check_main
from controller.errors import ConfigError
from controller.shipped import shipped_dir, shipped_names, table_file
from controller.supervisor.config import load_table_config
from controller.table_file import MAX_EXTENDS, read_table_doc
from devices.profiles import DeviceKind
from tests.support.config_dump import ROOT, plain

# Each shipped table's TableConfig as loaded when the tables were written out whole, each its own
# copy of the shared settings (tests/support/config_dump.py made it): one file per table in
# tests/data/shipped-tables/, so a new table brings its own record.
RECORDED = {
    p.stem: json.loads(p.read_text(encoding="utf-8"))
    for p in sorted((ROOT / "tests" / "data" / "shipped-tables").glob("*.json"))
}


def test_the_recorded_tables_are_the_shipped_tables() -> None:
    assert sorted(RECORDED) == shipped_names("tables")


@pytest.mark.parametrize("table", shipped_names("tables"))
def test_a_shipped_table_loads_exactly_as_it_did_written_out_whole(table: str) -> None:
    loaded = json.loads(json.dumps(plain(load_table_config(table_file(table), side="both"))))
    assert loaded == RECORDED[table]


@pytest.mark.parametrize("table", shipped_names("tables"))
def test_a_shipped_table_says_only_what_differs(table: str) -> None:
    text = table_file(table).read_text(encoding="utf-8")
    assert text.startswith("#") and 'extends = "base/' in text
    assert 'kind = "shuffler"' not in text and "site =" not in text  # the base's


def test_a_base_is_not_a_table() -> None:
    """The bases sit in a folder of their own: `config/tables/*.toml` (what the tests, the
    benchmarks and `tablectl run --config NAME` enumerate) is the playable tables only."""
    bases = sorted(p.name for p in (shipped_dir("tables") / "base").glob("*.toml"))
    assert bases == ["blackjack.toml", "example.toml"]
    assert not set(shipped_names("tables")) & {"blackjack", "example"}
    for base in bases:
        assert check_main([str(shipped_dir("tables") / "base" / base)]) == 2


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_tables_merge_key_by_key_and_anything_else_is_replaced(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "base.toml",
        '[table]\nsite = "s"\nid = "base"\n[devices.a]\nx = 1\nlist = [1, 2]\n[devices.a.sim]\ny = 2\n'
        "[devices.b]\nx = 3\n",
    )
    t = _write(
        tmp_path,
        "t.toml",
        'extends = "base.toml"\n[table]\nid = "t"\n[devices.c]\nx = 5\n[devices.a]\nlist = [9]\n'
        "[devices.a.sim]\nz = 4\n",
    )
    doc = read_table_doc(t)
    assert doc == {
        "table": {"site": "s", "id": "t"},
        "devices": {"a": {"x": 1, "list": [9], "sim": {"y": 2, "z": 4}}, "b": {"x": 3}, "c": {"x": 5}},
    }
    # The file's own order first (the devices are listed in it), then the base's other keys.
    assert list(doc["devices"]) == ["c", "a", "b"]


def test_a_bases_paths_stay_relative_to_the_base(tmp_path: Path) -> None:
    """A relative path a base gives is relative to the base's folder, as in any config file; a
    name that is no file there (a shipped profile's) is kept as written."""
    _write(tmp_path, "site/profiles/shoe.toml", "")
    _write(
        tmp_path,
        "site/bases/floor.toml",
        '[devices.shoe]\nprofile = "../profiles/shoe.toml"\n[devices.keypad]\nprofile = "ref-keypad"\n'
        '[devices.reader]\nprofile = "/abs/reader.toml"\n',
    )
    t = _write(tmp_path, "site/tables/t1.toml", 'extends = "../bases/floor.toml"\n')
    devices = read_table_doc(t)["devices"]
    assert devices["shoe"]["profile"] == "../profiles/shoe.toml"
    assert (t.parent / devices["shoe"]["profile"]).resolve() == (
        tmp_path / "site/profiles/shoe.toml"
    ).resolve()
    assert devices["keypad"]["profile"] == "ref-keypad"
    assert devices["reader"]["profile"] == "/abs/reader.toml"


def test_every_path_key_of_a_base_is_relative_to_the_base(tmp_path: Path) -> None:
    """Each key that names a file (``PATH_KEYS``), whichever section it is in."""
    files = ["games/g.toml", "pki/ca.pem", "users.toml", "pki/c.pem", "pki/k.pem", "devices/p.toml"]
    for f in files:
        _write(tmp_path, f"floor/{f}", "")
    _write(
        tmp_path,
        "floor/base.toml",
        '[table]\ngame = "games/g.toml"\n[telemetry]\nca_file = "pki/ca.pem"\n'
        '[console]\nusers = "users.toml"\ntls_cert = "pki/c.pem"\ntls_key = "pki/k.pem"\n'
        '[devices.d]\nprofile = "devices/p.toml"\n'
        'cert = "pki/c.pem"\nkey = "pki/k.pem"\nca_file = "pki/ca.pem"\n'
        '[devices.d.sim]\ncert = "pki/c.pem"\nkey = "pki/k.pem"\nca_file = "pki/ca.pem"\n',
    )
    t = _write(tmp_path, "tables/t.toml", 'extends = "../floor/base.toml"\n')
    doc = read_table_doc(t)
    named = [
        doc["table"]["game"],
        doc["telemetry"]["ca_file"],
        *(doc["console"][k] for k in ("users", "tls_cert", "tls_key")),
        *(doc["devices"]["d"][k] for k in ("profile", "cert", "key", "ca_file")),
        *(doc["devices"]["d"]["sim"][k] for k in ("cert", "key", "ca_file")),
    ]
    assert all(n.startswith("../floor/") and (t.parent / n).is_file() for n in named), named


def test_a_copy_elsewhere_extends_the_shipped_base(tmp_path: Path) -> None:
    """`sudo cp config/tables/<table>.toml /etc/tablectl/tables/` (docs/install.md): the copy finds
    the shipped base as it finds the shipped game and profiles."""
    copy = _write(tmp_path, "mine.toml", table_file("down-under").read_text(encoding="utf-8"))
    mine = load_table_config(copy, side="both").devices
    shipped = load_table_config(table_file("down-under"), side="both").devices
    assert [(d.name, d.profile.path.resolve(), d.endpoint) for d in mine] == [
        (d.name, d.profile.path.resolve(), d.endpoint) for d in shipped
    ]


def test_a_site_table_extends_a_shipped_table_by_name(tmp_path: Path) -> None:
    t = _write(
        tmp_path,
        "t9.toml",
        'extends = "down-under"\n[table]\nid = "dub-09"\n[devices.shoe]\nhost = "10.0.0.9"\n',
    )
    cfg = load_table_config(t, side="both")
    shoe = cfg.device_of(DeviceKind.SHOE)
    assert cfg.table_id == "dub-09" and shoe is not None and shoe.endpoint.host == "10.0.0.9"
    assert cfg.options.game.value == "down-under" and len(cfg.devices) == 4


def _refused(path: Path) -> str:
    with pytest.raises(ConfigError) as info:
        load_table_config(path)
    msg = str(info.value)
    assert "\n" not in msg, msg
    return msg


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        ("7", "extends: must be the path of a table file to extend"),
        ('""', "extends: must be the path of a table file to extend"),
        ('["a.toml"]', "extends: must be the path of a table file to extend"),
        ('"a\\nb.toml"', "extends: must be the path of a table file to extend"),
        ('"nope.toml"', "extends: nope.toml: no such table file"),
    ],
)
def test_a_bad_extends_is_one_line_naming_the_file_and_key(tmp_path: Path, value: str, rule: str) -> None:
    t = _write(tmp_path, "t.toml", f'extends = {value}\n[table]\nid = "t"\n')
    assert _refused(t).startswith(f"{t}: {rule}")


def test_a_cycle_is_refused_in_one_line(tmp_path: Path) -> None:
    a = _write(tmp_path, "a.toml", 'extends = "b.toml"\n')
    _write(tmp_path, "b.toml", 'extends = "a.toml"\n')
    msg = _refused(a)
    assert msg.startswith(f"{a}: extends: {tmp_path / 'b.toml'}: extends: a.toml: a cycle"), msg
    assert msg.endswith("(a.toml -> b.toml -> a.toml)")
    itself = _write(tmp_path, "self.toml", 'extends = "self.toml"\n')
    assert _refused(itself) == f"{itself}: extends: self.toml: a cycle (self.toml -> self.toml)"


def test_a_chain_deeper_than_the_bound_is_refused(tmp_path: Path) -> None:
    for i in range(200):
        _write(tmp_path, f"f{i}.toml", f'extends = "f{i + 1}.toml"\n')
    msg = _refused(tmp_path / "f0.toml")
    assert msg.endswith(f"extends: f{MAX_EXTENDS + 1}.toml: more than {MAX_EXTENDS} bases deep"), msg
    assert msg.count("extends:") == MAX_EXTENDS + 1
    # At the bound it loads (here: refused only for having no [table]).
    _write(tmp_path, f"f{MAX_EXTENDS}.toml", '[table]\nid = "t"\nsite = "s"\ngame = "down-under"\n')
    assert load_table_config(tmp_path / "f0.toml").table_id == "t"


def test_a_hostile_base_is_refused_by_the_bounded_reader(tmp_path: Path) -> None:
    _write(tmp_path, "base.toml", "x = " + "[" * 5000 + "]" * 5000 + "\n")
    t = _write(tmp_path, "t.toml", 'extends = "base.toml"\n')
    assert _refused(t) == f"{t}: extends: {tmp_path / 'base.toml'}: nested deeper than 32 levels"


def test_config_check_names_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = _write(tmp_path, "t.toml", 'extends = "missing.toml"\n')
    assert check_main([str(t)]) == 2
    assert (
        capsys.readouterr().err
        == f"{t}: extends: missing.toml: no such table file (relative to this file's folder)\n"
    )
    # A key the base gives is checked as the table file's own.
    t.write_text('extends = "dj-wild"\n[devices.shuffler]\nport = "x"\n', encoding="utf-8")
    assert check_main([str(t)]) == 2
    assert capsys.readouterr().err.startswith(f"{t}: devices.shuffler.port: ")
