"""README.md's list of what bin/test installs is the script's (issue 37: two lists in the README
disagreed with each other and with bin/test)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_readme_names_every_package_bin_test_installs_and_no_other() -> None:
    script = (ROOT / "bin" / "test").read_text(encoding="utf-8")
    lines = re.findall(r"apt-get install -y -qq ([a-z0-9 .-]+?) >", script)
    installed = {name for line in lines for name in line.split()}
    assert {"mosquitto", "chromium", "nats-server"} <= installed, installed
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (paragraph,) = [p for p in readme.split("\n\n") if p.startswith("`bin/test` installs")]
    named = set(re.findall(r"`([a-z0-9.-]+)`", paragraph))
    tools = {"bin/test", "dev", "report", "constraints.txt", "ruff", "mypy", "lint-imports", "pytest"}
    debian = named - tools - {"controller/", "devices/", "sim/", "promtool"}
    assert debian == installed, (debian, installed)
    # The one list: no other paragraph of the README says what bin/test installs from Debian.
    others = [p for p in readme.split("\n\n") if "bin/test" in p and "installs" in p and p != paragraph]
    only_for_tests = installed - {"mosquitto"}  # bin/tablectl installs mosquitto too, for the demo
    assert all(not set(re.findall(r"`([a-z0-9-]+)`", p)) & only_for_tests for p in others), others
