"""An embedded MQTT 3.1.1 broker on the standard library alone: ``tablectl demo``'s broker when
Debian's mosquitto is not installed (or with ``--embedded-broker``), and a broker for tests.

- ``packets``: framing, parsing and encoding of the control packets, topic names, filters and
  their matching (section 2, 3 and 4.7 of the standard);
- ``broker``: ``EmbeddedBroker``, sessions, routing, retained messages, Wills, keep alive;
- ``runner``: ``embedded_broker_thread``, the broker in a daemon thread for synchronous code.

What it does and leaves out (3.1.1 only, clean sessions only, QoS 2 only inbound, no TLS, no
ACL) is in docs/design.md; production uses mosquitto with ``config/mosquitto/``.
"""

from sim.mqtt_broker.broker import EmbeddedBroker
from sim.mqtt_broker.packets import (
    MalformedPacket,
    Message,
    check_topic_filter,
    check_topic_name,
    topic_matches,
)
from sim.mqtt_broker.runner import embedded_broker_thread

__all__ = [
    "EmbeddedBroker",
    "MalformedPacket",
    "Message",
    "check_topic_filter",
    "check_topic_name",
    "embedded_broker_thread",
    "topic_matches",
]
