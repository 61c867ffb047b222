"""One Modbus bus (a TCP connection or an RTU serial line) shared by the devices on it.

pymodbus allows one request at a time per client, so every request on a bus takes its turn on
the line (LineTurns), and serial lines get a quiet gap between requests. An urgent request (a
keypad's look at its key counter: the past-posting window, 687a.9(b)) goes ahead of every
ordinary one waiting, so on a shared RTU line the window waits for at most the request already
on the wire, not for the other devices' polls queued behind it. Each request carries its own device's
timeout, so a silent device on a shared RTU line holds the line for at most that long. pymodbus
is told not to retry or reconnect by itself: a failed request raises, our retry policy decides
whether to repeat it, and reconnection happens here with exponential backoff and jitter.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from pymodbus.client import AsyncModbusSerialClient, AsyncModbusTcpClient, AsyncModbusTlsClient
from pymodbus.exceptions import ConnectionException, ModbusException, ModbusIOException
from pymodbus.pdu import ModbusPDU

from controller.backoff import Backoff, BackoffPolicy
from controller.clock import REAL_CLOCK, Clock
from devices.config import NETWORK_MODBUS, Endpoint, TransportKind
from devices.errors import BadResponse, DeviceRefused, DeviceTimeout, LinkDown, TransportError
from devices.transport.line_turns import LineTurns

READ_HOLDING, WRITE_MULTIPLE = 0x03, 0x10  # the function codes the drivers use (Modbus spec 6.3, 6.12)

# Modbus exception 6 (device busy) is worth asking again; the others will not change.
_RETRYABLE_EXCEPTION_CODES = frozenset({6})
# After this many failed requests in a row on a TCP stream, drop the connection and reconnect:
# a garbled or half-read response can leave the stream out of step.
_RESYNC_AFTER = 2

_log = structlog.get_logger("devices.modbus")

# pymodbus debug logging hex-dumps every frame, and a shoe's frames carry card words: keep it
# above debug whatever the root logger is set to.
logging.getLogger("pymodbus").setLevel(max(logging.INFO, logging.getLogger("pymodbus").level))


class ModbusBus:
    def __init__(
        self,
        endpoint: Endpoint,
        *,
        backoff: BackoffPolicy | None = None,
        clock: Clock = REAL_CLOCK,
        rng: random.Random | None = None,
    ) -> None:
        if endpoint.transport not in (*NETWORK_MODBUS, TransportKind.MODBUS_RTU):
            raise ValueError(f"not a Modbus endpoint: {endpoint.transport}")
        if endpoint.transport is TransportKind.MODBUS_TLS and endpoint.tls is None:
            raise ValueError("a modbus-tls endpoint needs its certificate, key and CA")
        self.endpoint = endpoint
        self.clock = clock
        self._reconnect = Backoff(backoff or BackoffPolicy(), clock=clock, rng=rng)
        self._turns = LineTurns()
        self._client: AsyncModbusTcpClient | AsyncModbusSerialClient | None = None
        self._last_done = float("-inf")
        # On a serial line, until when the line is left quiet: after a request that timed out,
        # its late answer may still come, and pymodbus hands whatever frame arrives to the request
        # waiting then. A request sent straight after a timeout took that late answer for its own,
        # its own answer went to the next, and so on: one slow reply became a run of wrong ones
        # (a keypad "failed" on a busy machine). Left quiet for a reply limit, a late answer
        # arrives with nothing waiting and is dropped.
        self._quiet_until = float("-inf")
        self._failures_in_row = 0
        self._log = _log.bind(bus=endpoint.describe())
        self.requests = 0
        self.failures = 0

    @property
    def connected(self) -> bool:
        return self._client is not None and self._client.connected

    def _new_client(self) -> AsyncModbusTcpClient | AsyncModbusSerialClient:
        ep = self.endpoint
        # Long client-side timeout: each request is bounded by its own device's timeout below.
        common: dict[str, Any] = {"timeout": 30.0, "retries": 0, "reconnect_delay": 0}
        if ep.transport is TransportKind.MODBUS_TCP:
            return AsyncModbusTcpClient(ep.host, port=ep.port, **common)
        if ep.transport is TransportKind.MODBUS_TLS:
            assert ep.tls is not None  # checked in __init__
            # pymodbus's own Modbus/TCP Security client (MBAP over TLS); the context requires the
            # device's certificate, chained to our CA and naming the host, and presents ours.
            return AsyncModbusTlsClient(ep.host, port=ep.port, sslctx=ep.tls.context("client"), **common)
        # Modbus over Serial Line's 8E1 unless the table file says otherwise (what a pty can take
        # on a pty: see Framing.for_port).
        framing = ep.serial_framing.for_port(ep.path)
        return AsyncModbusSerialClient(ep.path, baudrate=ep.baudrate, **framing.pyserial(), **common)

    async def _ensure_connected(self, timeout_s: float) -> AsyncModbusTcpClient | AsyncModbusSerialClient:
        if self._client is not None and self._client.connected:
            return self._client
        wait = self._reconnect.wait_left()
        if wait > 0:
            raise LinkDown(f"{self.endpoint.describe()}: link down, reconnecting", retry_in_s=wait)
        self._drop_client()
        client = self._new_client()
        reason = "refused"
        try:
            async with asyncio.timeout(max(timeout_s, 1.0)):
                ok = await client.connect()
        except TimeoutError:
            ok, reason = False, "connect timed out"
        except (OSError, ModbusException) as exc:
            ok, reason = False, type(exc).__name__
        if not ok:
            client.close()
            delay = self._reconnect.failed()
            self._log.warning("connect_failed", reason=reason, retry_in_s=round(delay, 3))
            raise LinkDown(f"{self.endpoint.describe()}: cannot connect ({reason})")
        if self._reconnect.failures:
            self._log.info("reconnected", after_failures=self._reconnect.failures)
        self._reconnect.succeeded()
        self._failures_in_row = 0
        self._client = client
        return client

    def _drop_client(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def close(self) -> None:
        self._drop_client()

    async def _once(
        self,
        what: str,
        device_id: int,
        timeout_s: float,
        function: int,
        call: Callable[[Any], Awaitable[ModbusPDU]],
        urgent: bool = False,
    ) -> ModbusPDU:
        async with self._turns.turn(urgent):
            # The gap and the quiet time are properties of the wire: real time, not the clock.
            wait = max(self._last_done + self.endpoint.gap_s, self._quiet_until) - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            self.requests += 1
            where = f"{self.endpoint.describe()} id {device_id}"
            try:
                client = await self._ensure_connected(timeout_s)
                async with asyncio.timeout(timeout_s):
                    rr = await call(client)
            except TimeoutError:
                self._leave_quiet(timeout_s)
                raise self._failed(DeviceTimeout(f"{where}: no answer to {what} in {timeout_s}s")) from None
            except ConnectionException:
                self._drop_client()
                raise self._failed(LinkDown(f"{where}: connection lost during {what}")) from None
            except ModbusIOException as exc:
                raise self._failed(BadResponse(f"{where}: {what}: {_first_line(exc)}")) from None
            except ModbusException as exc:
                raise self._failed(BadResponse(f"{where}: {what}: {type(exc).__name__}")) from None
            except (OSError, ValueError, IndexError, KeyError) as exc:
                # pymodbus can trip over a mangled frame; the next request starts clean.
                self._drop_client()
                raise self._failed(BadResponse(f"{where}: {what}: {type(exc).__name__}")) from None
            finally:
                self._last_done = time.monotonic()
            if (int(rr.function_code) & 0x7F) != function:
                # The answer to another request, late (see _quiet_until): not this one's.
                self._leave_quiet(timeout_s)
                raise self._failed(
                    BadResponse(f"{where}: {what}: a reply of function {int(rr.function_code)} came instead")
                )
            if rr.isError():
                code = int(getattr(rr, "exception_code", 0) or 0)
                raise self._failed(
                    DeviceRefused(f"{where}: {what} refused with exception code {code}", code),
                    resync=False,
                )
            self._failures_in_row = 0
            return rr

    def _leave_quiet(self, timeout_s: float) -> None:
        """After a request left without its answer on a serial line: the next waits a reply limit."""
        if self.endpoint.transport is TransportKind.MODBUS_RTU:
            self._quiet_until = time.monotonic() + timeout_s

    def _failed(self, exc: TransportError, *, resync: bool = True) -> TransportError:
        self.failures += 1
        self._failures_in_row += 1
        if resync and self.endpoint.transport in NETWORK_MODBUS and self._failures_in_row >= _RESYNC_AFTER:
            self._drop_client()
        self._log.debug("request_failed", error=type(exc).__name__)
        return exc

    async def _with_retry(
        self,
        what: str,
        device_id: int,
        timeout_s: float,
        attempts: int,
        function: int,
        call: Callable[[Any], Awaitable[ModbusPDU]],
        urgent: bool = False,
    ) -> ModbusPDU:
        for attempt in range(1, attempts + 1):
            try:
                return await self._once(what, device_id, timeout_s, function, call, urgent)
            except LinkDown:
                raise
            except DeviceRefused as exc:
                if exc.code not in _RETRYABLE_EXCEPTION_CODES or attempt == attempts:
                    raise
            except TransportError:
                if attempt == attempts:
                    raise
            self._log.debug("retrying", what=what, device_id=device_id, attempt=attempt + 1)
        raise AssertionError("unreachable")

    async def read_holding(
        self, device_id: int, address: int, count: int, *, timeout_s: float, attempts: int = 1,
        urgent: bool = False,
    ) -> list[int]:  # fmt: skip
        what = f"read {count} at {address}"
        rr = await self._with_retry(
            what, device_id, timeout_s, attempts, READ_HOLDING,
            lambda c: c.read_holding_registers(address, count=count, device_id=device_id), urgent,
        )  # fmt: skip
        regs = list(getattr(rr, "registers", []) or [])
        if len(regs) != count:
            self._failed(BadResponse(""), resync=True)
            raise BadResponse(f"{self.endpoint.describe()} id {device_id}: {what}: got {len(regs)} registers")
        return regs

    async def write_registers(
        self, device_id: int, address: int, values: list[int], *, timeout_s: float,
        attempts: int = 1, urgent: bool = False,
    ) -> None:  # fmt: skip
        await self._with_retry(
            f"write {len(values)} at {address}", device_id, timeout_s, attempts, WRITE_MULTIPLE,
            lambda c: c.write_registers(address, values, device_id=device_id), urgent,
        )  # fmt: skip


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:160] if text else type(exc).__name__


class BusRegistry:
    """One ModbusBus per physical bus, so devices that share an RTU line share its lock."""

    def __init__(self, clock: Clock = REAL_CLOCK) -> None:
        self.clock = clock
        self._buses: dict[tuple[str, str, int], ModbusBus] = {}

    def bus(self, endpoint: Endpoint, backoff: BackoffPolicy | None = None) -> ModbusBus:
        key = endpoint.bus_key
        if key not in self._buses:
            self._buses[key] = ModbusBus(endpoint, backoff=backoff, clock=self.clock)
        return self._buses[key]

    def close(self) -> None:
        for b in self._buses.values():
            b.close()
        self._buses.clear()
