"""``tablectl broker``: the broker README's sim/run/monitor example starts (issue 37: the example
used a broker on 1883 without saying how to start one). Its URL is the one line on stdout, a
client publishes and reads through it, and SIGTERM stops it with status 0."""

from __future__ import annotations

import asyncio
import signal
import sys

import aiomqtt

from controller.supervisor.rig import ROOT
from tests import mosquitto_fixtures

GUARD_S = 30.0  # failure guard only


async def test_tablectl_broker_says_its_url_and_carries_messages() -> None:
    mosquitto_fixtures.mosquitto_binary()  # skips when mosquitto is not installed
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "controller.cli", "broker", cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        async with asyncio.timeout(GUARD_S):
            url = (await proc.stdout.readline()).decode().strip()
            assert url.startswith("mqtt://127.0.0.1:"), url
            port = int(url.rsplit(":", 1)[1])
            assert port != 1883
            async with aiomqtt.Client("127.0.0.1", port, identifier="broker-test") as client:
                await client.publish("tablectl/s/t/status", b'{"online":true}', qos=1, retain=True)
                await client.subscribe("tablectl/#", qos=1)
                message = await anext(aiter(client.messages))
                assert message.payload == b'{"online":true}'
            proc.send_signal(signal.SIGTERM)
            rest, err = await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, err.decode()
    assert rest == b""  # stdout: the URL and nothing else
    assert f"mosquitto on 127.0.0.1:{port}" in err.decode()
