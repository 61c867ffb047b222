"""Device-layer errors: one line each, naming the device and what went wrong.

None of these messages may carry a card, a reader result, stub contents or a shuffle order.
"""

from __future__ import annotations

from controller.errors import TablectlError


class DeviceError(TablectlError):
    """Base for every device-layer failure."""


class TransportError(DeviceError):
    """The wire failed: no link, no answer, or an answer that is not a valid frame."""


class LinkDown(TransportError):
    """Not connected (and not yet time to try again). The message says what happened and may
    become an alarm's words, so the time left before the next attempt, which is stale a moment
    later, is ``retry_in_s``, never part of the message."""

    def __init__(self, message: str, retry_in_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_in_s = retry_in_s


class DeviceTimeout(TransportError):
    """The device did not answer within its timeout."""


class BadResponse(TransportError):
    """An answer arrived but is malformed, for another request, or an exception response."""


class DeviceRefused(BadResponse):
    """The device answered with a Modbus exception response."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


class FrameDecodeError(DeviceError):
    """A frame or register block that does not decode per the device profile; ``count`` broken
    frames in a row when a decoder coalesced them."""

    def __init__(self, reason: str, count: int = 1) -> None:
        super().__init__(reason)
        self.count = count


class CommandRejected(DeviceError):
    """A command the driver or device refuses (wrong kind, bad argument, device refused)."""


class ProfileError(DeviceError):
    """A device profile file that cannot be used."""
