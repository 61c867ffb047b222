"""What ``tablectl run`` refuses before it starts, and ``tablectl config check`` with it: one list,
so that the check the shipped systemd unit runs first (``ExecStartPre``) passes exactly the
files ``run`` accepts.

The table file's reading (``load_table_config``) is shared with ``tablectl sim``, which may let
the operating system choose a port (0) or make a serial line's pty itself; what only the
appliance needs is checked here: the devices the game's chapter requires (a table file naming one
device, read to test that device, is still a table file), a port to dial, a serial line that is
a serial device, and the console's users file and certificate. Every refusal is one ConfigError
line naming the key.
"""

from __future__ import annotations

import os
import stat

from controller.errors import ConfigError
from controller.server_settings import ConsoleSettings
from controller.supervisor.config import TableConfig
from devices.config import NETWORK_MODBUS, TransportKind
from devices.profiles import DeviceKind

SERIAL = (TransportKind.MODBUS_RTU, TransportKind.SERIAL_LINE)
_READERS = {
    "peek": "tells whether the hole card gives the dealer a Blackjack (a peek reader)",
    "masque": "is a Masque Card Reader, lighting the hole card's range (a masque reader)",
}


def check_for_run(config: TableConfig, console: ConsoleSettings | None, users_flag: bool = False) -> None:
    """Raise ConfigError for anything that stops ``run``; ``console`` as ``run`` would use it
    (None: no console), ``users_flag`` when its users file came from ``--users``."""
    _chapter_devices(config)
    _endpoints(config)
    if console is not None:
        _console(config, console, users_flag)


def _chapter_devices(config: TableConfig) -> None:
    """The devices the chapter requires, found among the table's devices (not read off the game
    file's keys): without one the table would deal into a wait that cannot end. Each refusal
    names the subsection and the key to change: ``devices`` for a device the table lacks, the
    device's own ``devices.<name>`` for one the game file says the table does not use."""
    p, options = config.path, config.options
    spec = options.spec
    title = spec.title
    by_kind = {d.kind: d for d in config.devices}
    for kind_name, section in spec.required_devices:
        kind = DeviceKind(kind_name)
        if kind not in by_kind:
            raise ConfigError(
                f"{p}: devices: {section}: a {title} table must have a {kind.value}"
                f' (a [devices.<name>] with kind = "{kind.value}")'
            )
    shoe = by_kind.get(DeviceKind.SHOE)
    if shoe is not None and spec.dealt_from_hand:
        raise ConfigError(
            f"{p}: devices.{shoe.name}: {spec.dealt_from_hand}: {title} is dealt from the dealer's hand;"
            " a dealing shoe has no place at the table (a self-shuffling one neither)"
        )
    reader = by_kind.get(DeviceKind.READER)
    # The driver reads a profile without options.mode as a peek reader (devices/drivers/reader.py).
    mode = str(reader.profile.options.get("mode", "peek")) if reader is not None else ""
    if reader is not None and spec.reader_mode and mode != spec.reader_mode:
        section = dict(spec.required_devices).get("reader", spec.chapter)
        want = _READERS[spec.reader_mode]
        raise ConfigError(
            f"{p}: devices.{reader.name}.profile: {section}: a {title} table's reader {want};"
            f" {reader.profile.name} is a {mode} reader (options.mode)"
        )
    shuffler = by_kind.get(DeviceKind.SHUFFLER)
    if options.automated_shuffler and shuffler is None:
        instead = (
            ""
            if spec.dealt_from_hand
            else "; or set automated_shuffler = false in table.game to shuffle by hand"
        )
        raise ConfigError(
            f"{p}: devices: {spec.shuffler_section}: the game file (table.game) has an automated shuffler,"
            f' but the table has no device of kind = "shuffler"{instead}'
        )
    if shuffler is not None and not options.automated_shuffler:
        if options.self_shuffling_shoe:
            section = f"{spec.chapter}.5(h)"
            why = (
                "a self-shuffling shoe replaces the batch shuffler (self_shuffling_shoe = true in table.game)"
            )
        else:
            section = spec.shuffler_section
            why = "the game file (table.game) shuffles by hand (automated_shuffler = false)"
        raise ConfigError(
            f"{p}: devices.{shuffler.name}: {section}: {why}; remove the shuffler or change the game file"
        )
    if options.progressive and DeviceKind.KEYPAD not in by_kind:
        raise ConfigError(
            f"{p}: devices: 687a.9(b): Progressive Bonus Wagers are placed on the keypad's sensors and"
            ' locked by its Start Game: the table needs a device of kind = "keypad"'
            " (or [wagers] progressive = false in table.game)"
        )


def _endpoints(config: TableConfig) -> None:
    """Port 0 and an empty serial path let only the simulator choose; the appliance would dial
    nowhere for ever. A serial path that exists must be a serial device (a character device, or
    a link to one such as the simulator's pty): a regular file such as /etc/passwd would be read
    as a device's frames. A path not there yet is the device's to appear (an alarm says so)."""
    for d in config.devices:
        ep = d.endpoint
        if ep.transport in NETWORK_MODBUS and ep.port == 0:
            key, need = "port", "the device's TCP port"
        elif ep.transport in SERIAL and not ep.path:
            key, need = "path", "the serial port the device is on"
        elif ep.transport in SERIAL and not _serial_or_absent(ep.path):
            raise ConfigError(
                f"{config.path}: devices.{d.name}.path: {ep.path} is not a serial device"
                " (a character device such as /dev/ttyUSB0, or a link to one)"
            )
        else:
            continue
        raise ConfigError(
            f"{config.path}: devices.{d.name}.{key}: tablectl run needs {need}"
            " (0 or empty lets only tablectl sim choose)"
        )


def _serial_or_absent(path: str) -> bool:
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return True
    except OSError:
        return False  # there but not usable (a loop of links, a path through a file)
    return stat.S_ISCHR(mode)


def _console(config: TableConfig, console: ConsoleSettings, users_flag: bool) -> None:
    """The users file and the TLS certificate and key the console's process will read: loaded
    now, so that a missing, garbled or mismatched file stops the start with its key named."""
    from controller.console.tls import server_context
    from controller.console.users import load_users

    where = "--users" if users_flag else f"{config.path}: console.users"
    try:
        load_users(console.users)
    except ConfigError as e:
        raise ConfigError(f"{where}: {e}") from None
    if console.tls_cert is not None and console.tls_key is not None:
        try:
            server_context(console.tls_cert, console.tls_key)
        except ConfigError as e:
            raise ConfigError(f"{config.path}: console.tls_cert, console.tls_key: {e}") from None
