"""Publish and subscribe through the embedded broker with real aiomqtt clients and raw sockets:
QoS 0 and 1 both ways, QoS 2 from a publisher, retained messages, unsubscribing, overlapping
subscriptions, and many publishers at once."""

from __future__ import annotations

import asyncio
import itertools
import logging

import pytest

from sim.mqtt_broker import EmbeddedBroker
from tests.broker.conftest import (
    GUARD_S,
    LOGGER,
    PINGREQ,
    PINGRESP,
    PUBACK,
    PUBCOMP,
    PUBLISH,
    PUBREC,
    SUBACK,
    UNSUBACK,
    Raw,
    Will,
    client,
    connect_packet,
    id_packet,
    messages,
    next_message,
    payload,
    publish_packet,
    raw,
    subscribe_packet,
    unsubscribe_packet,
    warnings,
)


@pytest.mark.parametrize(("pub_qos", "sub_qos"), list(itertools.product([0, 1, 2], [0, 1, 2])))
async def test_delivery_is_at_the_lower_qos_capped_at_one(
    broker: EmbeddedBroker, pub_qos: int, sub_qos: int
) -> None:
    async with client(broker, "sub") as sub, client(broker, "pub") as pub:
        await sub.subscribe("t/#", qos=sub_qos)
        await pub.publish("t/x", b"hello", qos=pub_qos)  # QoS 1 and 2 return once PUBACK / PUBCOMP came
        m = await next_message(sub)
    assert (m.topic.value, payload(m), m.qos, m.retain) == ("t/x", b"hello", min(pub_qos, sub_qos, 1), False)


async def test_suback_grants_at_most_qos_1_in_request_order(broker: EmbeddedBroker) -> None:
    async with raw(broker, "s") as s:
        await s.send(subscribe_packet(42, ("a", 2), ("b", 0), ("c/#", 1)))
        ack = await s.read()
    assert (ack.kind, ack.packet_id, ack.body[2:]) == (SUBACK, 42, bytes([1, 0, 1]))


async def test_qos1_both_ways_on_the_wire(broker: EmbeddedBroker, caplog: pytest.LogCaptureFixture) -> None:
    """The publisher's QoS 1 gets a PUBACK with its id; each QoS 1 delivery has its own non-zero
    packet id, and the subscriber's PUBACKs are taken without complaint."""
    async with raw(broker, "sub") as sub, raw(broker, "pub") as pub:
        await sub.send(subscribe_packet(1, ("q/+", 1)))
        assert (await sub.read()).kind == SUBACK
        for i in range(1, 4):
            await pub.send(publish_packet("q/a", b"m%d" % i, qos=1, packet_id=100 + i))
            ack = await pub.read()
            assert (ack.kind, ack.flags, ack.packet_id) == (PUBACK, 0, 100 + i)
        got = [await sub.read() for _ in range(3)]
        assert [(p.kind, p.qos, p.retain, p.payload) for p in got] == [
            (PUBLISH, 1, False, b"m%d" % i) for i in (1, 2, 3)
        ]
        ids = [p.packet_id for p in got]
        assert len(set(ids)) == 3 and 0 not in ids
        for pid in ids:
            await sub.send(id_packet(0x40, pid))
        await sub.send(PINGREQ)
        assert (await sub.read()).kind == PINGRESP
        assert broker.client_ids() == {"sub", "pub"}
    assert warnings(caplog) == []


async def test_qos2_publisher_handshake_delivers_once(broker: EmbeddedBroker) -> None:
    """PUBLISH -> PUBREC; a resent PUBLISH (DUP) with the same id -> PUBREC again but no second
    delivery [MQTT-4.3.3-2]; PUBREL -> PUBCOMP. The subscriber (QoS 2 requested, 1 granted) gets
    the message once, at QoS 1."""
    async with client(broker, "sub") as sub, raw(broker, "pub") as pub:
        await sub.subscribe("exactly/once", qos=2)
        await pub.send(publish_packet("exactly/once", b"one", qos=2, packet_id=7))
        rec = await pub.read()
        assert (rec.kind, rec.flags, rec.packet_id) == (PUBREC, 0, 7)
        await pub.send(publish_packet("exactly/once", b"one", qos=2, packet_id=7, dup=True))
        assert (await pub.read()).packet_id == 7
        await pub.send(id_packet(0x62, 7))  # PUBREL has flags 0010 [MQTT-3.6.1-1]
        comp = await pub.read()
        assert (comp.kind, comp.flags, comp.packet_id) == (PUBCOMP, 0, 7)
        # The same id after PUBREL is a new message.
        await pub.send(publish_packet("exactly/once", b"two", qos=2, packet_id=7))
        assert (await pub.read()).kind == PUBREC
        await pub.send(id_packet(0x62, 7))
        assert (await pub.read()).kind == PUBCOMP
        got = await messages(sub, 2)
    assert [(payload(m), m.qos) for m in got] == [(b"one", 1), (b"two", 1)]


async def test_retained_set_replaced_cleared_and_delivered_on_subscribe(broker: EmbeddedBroker) -> None:
    async with client(broker, "pub") as pub:
        await pub.publish("r/a", b"old", qos=1, retain=True)
        await pub.publish("r/a", b"new", qos=1, retain=True)  # replaces [MQTT-3.3.1-5]
        await pub.publish("r/b", b"kept", qos=0, retain=True)
        await pub.publish("r/c", b"not retained", qos=1)
        async with client(broker, "late") as late:
            await late.subscribe("r/#", qos=1)
            got = sorted((m.topic.value, payload(m), m.retain, m.qos) for m in await messages(late, 2))
            assert got == [("r/a", b"new", True, 1), ("r/b", b"kept", True, 0)]
            # Towards an established subscription RETAIN is 0 [MQTT-3.3.1-9]; an empty retained
            # message clears the topic and is itself delivered as normal [MQTT-3.3.1-10].
            await pub.publish("r/a", b"", qos=1, retain=True)
            m = await next_message(late)
            assert (m.topic.value, payload(m), m.retain) == ("r/a", b"", False)
        async with client(broker, "later") as later:
            await later.subscribe("r/#", qos=1)
            (m,) = await messages(later, 1)
            assert (m.topic.value, payload(m), m.retain) == ("r/b", b"kept", True)
            await pub.publish("r/marker", b"after", qos=1)
            m = await next_message(later)  # nothing retained for r/a came before the marker
            assert (m.topic.value, payload(m)) == ("r/marker", b"after")


async def test_resubscribing_replaces_the_subscription_and_resends_retained(broker: EmbeddedBroker) -> None:
    async with client(broker, "pub") as pub, client(broker, "sub") as sub:
        await pub.publish("s/x", b"ret", qos=1, retain=True)
        await sub.subscribe("s/x", qos=0)
        assert (await next_message(sub)).qos == 0
        await sub.subscribe("s/x", qos=1)  # [MQTT-3.8.4-3]
        m = await next_message(sub)
        assert (payload(m), m.retain, m.qos) == (b"ret", True, 1)
        await pub.publish("s/x", b"live", qos=1)
        m = await next_message(sub)  # one subscription, so one copy
        assert (payload(m), m.qos) == (b"live", 1)
        await sub.subscribe("s/y", qos=0)
        await pub.publish("s/y", b"marker", qos=1)
        assert payload(await next_message(sub)) == b"marker"


async def test_overlapping_subscriptions_get_one_copy_at_the_highest_qos(broker: EmbeddedBroker) -> None:
    async with client(broker, "pub") as pub, client(broker, "sub") as sub:
        await sub.subscribe([("o/#", 0), ("o/+", 1), ("o/a", 0)])
        await pub.publish("o/a", b"first", qos=1)
        await pub.publish("o/a", b"second", qos=1)
        got = await messages(sub, 2)
    assert [(payload(m), m.qos) for m in got] == [(b"first", 1), (b"second", 1)]  # [MQTT-3.3.5-1]


async def test_unsubscribe(broker: EmbeddedBroker) -> None:
    async with client(broker, "pub") as pub, client(broker, "sub") as sub:
        await sub.subscribe([("u/a/#", 1), ("u/b", 1)])
        await pub.publish("u/a/1", b"before", qos=1)
        assert payload(await next_message(sub)) == b"before"
        await sub.unsubscribe("u/a/#")
        await pub.publish("u/a/1", b"after", qos=1)
        await pub.publish("u/b", b"still", qos=1)
        m = await next_message(sub)
        assert (m.topic.value, payload(m)) == ("u/b", b"still")
    async with raw(broker, "r") as r:  # UNSUBACK even for filters never subscribed [MQTT-3.10.4-5]
        await r.send(unsubscribe_packet(9, "never/subscribed", "x/#"))
        ack = await r.read()
        assert (ack.kind, ack.flags, ack.packet_id, len(ack.body)) == (UNSUBACK, 0, 9, 2)


async def test_wildcards_do_not_see_dollar_topics(broker: EmbeddedBroker) -> None:
    async with client(broker, "pub") as pub, client(broker, "all") as every, client(broker, "sys") as sys_:
        await every.subscribe("#", qos=1)
        await sys_.subscribe("$SYS/#", qos=1)
        await pub.publish("$SYS/broker/uptime", b"1", qos=1)
        await pub.publish("plain", b"2", qos=1)
        assert (await next_message(sys_)).topic.value == "$SYS/broker/uptime"
        assert (await next_message(every)).topic.value == "plain"  # [MQTT-4.7.2-1]


async def test_a_publisher_receives_its_own_messages_when_subscribed(broker: EmbeddedBroker) -> None:
    async with client(broker, "echo") as c:  # MQTT 3.1.1 has no "no local" option
        await c.subscribe("echo", qos=1)
        await c.publish("echo", b"me", qos=1)
        assert payload(await next_message(c)) == b"me"


async def test_many_publishers_arrive_complete_and_in_order(broker: EmbeddedBroker) -> None:
    publishers, each = 20, 200
    async with client(broker, "sink") as sink:
        await sink.subscribe("load/#", qos=1)

        async def publish(n: int) -> None:
            async with client(broker, f"pub-{n}") as pub:
                for i in range(each):
                    await pub.publish(f"load/{n}", b"%d" % i, qos=1)

        async with asyncio.timeout(GUARD_S), asyncio.TaskGroup() as tg:
            for n in range(publishers):
                tg.create_task(publish(n))
            seen: dict[str, list[int]] = {}
            async for m in sink.messages:
                assert m.qos == 1
                seen.setdefault(m.topic.value, []).append(int(payload(m)))
                if sum(map(len, seen.values())) == publishers * each:
                    break
    assert seen == {f"load/{n}": list(range(each)) for n in range(publishers)}  # [4.6] ordered per topic


async def test_a_subscriber_that_does_not_read_is_dropped_and_others_go_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Writes never wait for a subscriber: one that reads nothing grows its own buffer until the
    bound, is disconnected (its Will published), and the publisher and another subscriber go on."""
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    async with EmbeddedBroker(max_write_buffer=256 << 10) as broker, client(broker, "fast") as fast:
        await fast.subscribe([("big/#", 0), ("will/#", 1)])
        await _stuck_subscriber(broker)
        blob = bytes(64 << 10)

        async with client(broker, "pub") as pub:

            async def flood() -> None:
                while True:
                    await pub.publish("big/x", blob, qos=1)

            flooding = asyncio.create_task(flood())
            try:
                async with asyncio.timeout(GUARD_S):
                    async for m in fast.messages:
                        if m.topic.value == "will/stuck":
                            break
            finally:
                flooding.cancel()
            assert broker.client_ids() == {"fast", "pub"}
            # The publisher is still served.
            await pub.publish("will/after", b"ok", qos=1)
            async with asyncio.timeout(GUARD_S):
                async for m in fast.messages:
                    if m.topic.value == "will/after":
                        break
    assert any("slow consumer" in w for w in warnings(caplog))


async def _stuck_subscriber(broker: EmbeddedBroker) -> Raw:
    conn = await Raw.open(broker.port)
    await conn.send(connect_packet("stuck", will=Will("will/stuck", b"too slow", 1)))
    assert (await conn.read()).body == b"\x00\x00"
    await conn.send(subscribe_packet(1, ("big/#", 0)))
    assert (await conn.read()).kind == SUBACK
    return conn  # never read from again
