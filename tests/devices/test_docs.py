"""The device docs name every register and frame field of every profile."""

from __future__ import annotations

import pytest

from devices.profiles import load_profile
from devices.variants import variant_of
from tests.devices.conftest import DEVICES, ROOT


def _page(profile: str) -> str:
    """The page that documents a shipped profile: its own ``page``, else its variant's."""
    prof = load_profile(DEVICES / profile)
    return prof.page or variant_of(prof).page


PAGES = {p.name: _page(p.name) for p in sorted(DEVICES.glob("*.toml"))}


@pytest.mark.parametrize("profile", sorted(p.name for p in DEVICES.glob("*.toml")))
def test_every_field_is_documented(profile: str) -> None:
    page = (ROOT / "docs" / "devices" / PAGES[profile]).read_text(encoding="utf-8")
    prof = load_profile(DEVICES / profile)
    for reg in prof.registers.values():
        assert f"`{reg.name}`" in page
        assert str(reg.address) in page
    for frame in prof.frames.values():
        assert f"`{frame.tag}`" in page
        for f in frame.fields:
            assert f"`{f.name}`" in page and f"{f.min}-{f.max}" in page


def test_the_stub_counter_page_says_the_table_expects_53_minus_the_cards_dealt() -> None:
    """Issue: a counter built to the page sent 53 and halted every DJ Wild round. The page must
    say what the table compares with (controller/table/wild.py: the deck's cards still in the
    shoe after the deal) and that the device does not compare."""
    page = " ".join((ROOT / "docs" / "devices" / "stub-counter.md").read_text(encoding="utf-8").split())
    assert "53 minus the cards dealt" in page
    assert "The device never compares the count with 53" in page
    assert "equals the table's `expected`" not in page


def test_the_masque_result_has_one_vocabulary_and_its_documented_range() -> None:
    """Issue: reader.md said 0-2 while the Masque profile uses 3, and register, event and journal
    named one value three ways. One name set, the regulation's (685a.7(h)), end to end."""
    from controller.rules.requests import MasqueRange as CoreRange
    from devices.events import MasqueLight

    masque = load_profile(DEVICES / "ref-reader-masque.toml")
    names = {k for k in masque.enums["result"] if k != "none"}
    assert names == {m.value for m in MasqueLight} == {r.value for r in CoreRange}
    page = " ".join((ROOT / "docs" / "devices" / "reader.md").read_text(encoding="utf-8").split())
    assert "masque 0-3" in page and max(masque.enums["result"].values()) == 3
    peek = load_profile(DEVICES / "ref-reader-peek.toml")
    assert "peek 0-2" in page and max(peek.enums["result"].values()) == 2


def test_a_shipped_rtu_timeout_below_the_libmodbus_margin_says_so_on_its_line() -> None:
    """Issue: README.md says a libmodbus device on a shared line needs timeout_s above 0.5 s while
    every shipped table uses 0.3 s. Each such line says it is for the reference devices and gives
    the value for a libmodbus line."""
    import tomllib

    # The bases the tables extend too (config/tables/base/): the line is where the value is.
    files = sorted((ROOT / "config" / "tables").rglob("*.toml"))
    assert any(f.parent.name == "base" for f in files)
    checked = 0
    for table in files:
        text = table.read_text(encoding="utf-8")
        doc = tomllib.loads(text)
        for name, dev in doc.get("devices", {}).items():
            if dev.get("transport") != "modbus-rtu" or dev.get("timeout_s", 0.5) > 0.5:
                continue
            section = text[text.index(f"[devices.{name}]") :]
            line = next(x for x in section.splitlines() if x.startswith("timeout_s"))
            assert "libmodbus" in line and "0.6" in line, (table.name, name, line)
            checked += 1
    assert checked


def _register_rows(page: str) -> dict[str, str]:
    """A page's register table: name -> the whole row (``| `name` | address | ... |``)."""
    rows = {}
    for line in page.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) >= 8 and cells[0].count("`") == 2:
            rows[cells[0].strip("`")] = line
    return rows


@pytest.mark.parametrize("profile", sorted(p for p, page in PAGES.items() if not page.startswith("..")))
def test_no_page_calls_optional_a_word_its_profile_requires(profile: str) -> None:
    """Issue: keypad.md called `key_amount` optional while the shipped profile reads all 45 words in
    one block (a keypad built to the page without them fails every poll). Every register a shipped
    profile names is read: its page may not call it optional, in the table or in the text."""
    page = (ROOT / "docs" / "devices" / PAGES[profile]).read_text(encoding="utf-8")
    prof = load_profile(DEVICES / profile)
    rows = _register_rows(page)
    text = " ".join(page.split())
    for reg in prof.registers:
        assert "optional" not in rows.get(reg, "").lower(), (profile, reg, rows.get(reg))
        assert f"`{reg}` is optional" not in text, (profile, reg)
