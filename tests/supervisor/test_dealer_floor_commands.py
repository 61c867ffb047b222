"""The virtual dealer's floor commands over MQTT are a console's: a command sent while `tablectl
run` is down (killed, restarting) is not queued for it, and one sent while it reads its devices
after a restart is refused with "send it again" (docs/mqtt.md). Either way a console sends it
again; the dealer gave up instead, and the wire soak's kills stopped it."""

from __future__ import annotations

import asyncio
import json

import aiomqtt

from sim.mqtt_link import MqttLink

GUARD_S = 60.0  # failure guard only


async def test_a_floor_command_the_table_never_got_is_sent_again(broker: str) -> None:
    """A floor command sent while `tablectl run` is down (killed, restarting) is not queued for it
    (clean session, docs/mqtt.md): the dealer's first command of a fresh table waited two minutes
    for a result that could not come, then gave up. Like a console, it sends it again."""
    link = MqttLink(broker, "site-1", "tbl-1", idle_timeout_s=GUARD_S, resend_s=0.05)
    async with aiomqtt.Client("127.0.0.1", int(broker.rsplit(":", 1)[1])) as table:
        await table.subscribe("tablectl/site-1/tbl-1/cmd/+", qos=1)
        async with link:
            sent = asyncio.create_task(link.floor("new_dealer", {"name": "dealer-1"}))
            ids = []
            async with asyncio.timeout(GUARD_S):
                async for message in table.messages:
                    body = json.loads(message.payload)  # type: ignore[arg-type]
                    ids.append(body["id"])
                    if len(ids) == 2:  # the first went nowhere (the table was down); answer the second
                        result = {"version": 1, "id": body["id"], "ok": True}
                        await table.publish(f"{message.topic}/result", json.dumps(result), qos=1)
                        break
                await sent
    assert ids[0] == ids[1]  # the same request, so that its result answers either


async def test_a_floor_command_refused_while_the_table_reads_its_devices_is_sent_again(broker: str) -> None:
    """Just after a restart the table refuses every command with "...; send it again" and changes
    nothing (docs/mqtt.md). The dealer took that for the table stopping it and gave up (seen after
    a kill -9 of run at a Double Attack cut); like a console, it sends it again."""
    link = MqttLink(broker, "site-1", "tbl-1", idle_timeout_s=GUARD_S, resend_s=GUARD_S, again_s=0.01)
    async with aiomqtt.Client("127.0.0.1", int(broker.rsplit(":", 1)[1])) as table:
        await table.subscribe("tablectl/site-1/tbl-1/cmd/+", qos=1)
        async with link:
            sent = asyncio.create_task(link.floor("cut_made", {"at": 100, "by": 0}))
            answers = [
                {"ok": False, "error": "cut_made: the table is reading its devices; send it again"},
                {"ok": True},
            ]
            async with asyncio.timeout(GUARD_S):
                async for message in table.messages:
                    body = json.loads(message.payload)  # type: ignore[arg-type]
                    result = {"version": 1, "id": body["id"], **answers.pop(0)}
                    await table.publish(f"{message.topic}/result", json.dumps(result), qos=1)
                    if not answers:
                        break
                await sent  # no TableStopped: the second one was taken
