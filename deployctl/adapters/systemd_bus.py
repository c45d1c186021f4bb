"""The connection to systemd on the system bus, kept alive: every call bounded, a dropped connection
reconnected and the call retried, systemd followed to its new unique name across ``daemon-reexec``.

What a reconnect restores: the match rules (systemd's ``JobRemoved``, ``NameOwnerChanged`` for
systemd's name, and each watched unit's own ``PropertiesChanged``) and ``Manager.Subscribe``. Signals
sent while no connection existed are lost; the caller is told (``on_reconnect``) so that it re-reads
what it was waiting for (a job's existence, a unit's state).

A method call whose connection died before the reply is sent again on the new connection. All calls
deployctl makes are safe to repeat (Reload, Start/Stop/RestartUnit in mode ``replace``, reads): at worst
a unit is restarted twice, and it ends in the state asked for.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from typing import Any, Callable

from dbus_fast import BusType, Message, MessageFlag, MessageType
from dbus_fast.aio import MessageBus
from dbus_fast.errors import DBusError

from deployctl.adapters.aio import bounded
from deployctl.errors import SystemdError

log = logging.getLogger("deployctl.systemd")

SYSTEMD = "org.freedesktop.systemd1"
MANAGER_PATH = "/org/freedesktop/systemd1"
MANAGER = "org.freedesktop.systemd1.Manager"
PROPERTIES = "org.freedesktop.DBus.Properties"
DBUS = "org.freedesktop.DBus"
DBUS_PATH = "/org/freedesktop/DBus"

# A method call systemd has not answered in this long will not be answered.
CALL_TIMEOUT_S = 25.0
# How long a call keeps trying through a lost connection or systemd being off the bus (a reexec takes
# about a second; dbus-daemon restarting a little more).
RETRY_WINDOW_S = 30.0
_BACKOFF_S = (0.05, 0.1, 0.2, 0.5, 1.0)
# Errors that mean "systemd is not on the bus right now" (reexec, dbus restarting): try again.
_TRANSIENT = {
    "org.freedesktop.DBus.Error.ServiceUnknown",
    "org.freedesktop.DBus.Error.NameHasNoOwner",
    "org.freedesktop.DBus.Error.NoReply",
    "org.freedesktop.DBus.Error.Disconnected",
    "org.freedesktop.DBus.Error.Spawn.ChildExited",
    "org.freedesktop.systemd1.ShuttingDown",
}
_BASE_RULES = (
    f"type='signal',sender='{SYSTEMD}',path='{MANAGER_PATH}',interface='{MANAGER}',member='JobRemoved'",
    f"type='signal',sender='{DBUS}',interface='{DBUS}',member='NameOwnerChanged',arg0='{SYSTEMD}'",
)


class ConnectionLost(Exception):
    """The bus connection ended while a call was waiting for its reply."""


def properties_rule(path: str) -> str:
    """The match for one unit's own ``PropertiesChanged`` (not every unit's)."""
    return f"type='signal',sender='{SYSTEMD}',path='{path}',interface='{PROPERTIES}',member='PropertiesChanged'"


class SystemdBus:
    """``await SystemdBus(address, on_signal, on_reconnect).open()``; ``call`` a method; ``close``."""

    def __init__(self, address: str | None, on_signal: Callable[[Message], None],
                 on_reconnect: Callable[[], None]) -> None:
        self.address = address
        self.systemd_name = ""  # systemd's unique name on the bus, followed across reexec
        self._on_signal = on_signal
        self._on_reconnect = on_reconnect
        self._bus: MessageBus | None = None
        self._rules: Counter[str] = Counter()  # per-unit matches to restore on a reconnect
        self._reconnecting: asyncio.Lock | None = None
        self._closed = False
        self._monitor: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[None]] = set()
        self.reconnects = 0

    async def open(self) -> "SystemdBus":
        self._use(await self._connect())
        return self

    def close(self) -> MessageBus | None:
        self._closed = True
        for task in (self._monitor, *self._background):
            if task is not None:
                task.cancel()
        bus, self._bus = self._bus, None
        if bus is not None:
            bus.disconnect()
        return bus

    @property
    def connection(self) -> MessageBus | None:
        """The live connection (tests drop it to prove the reconnect)."""
        return self._bus

    async def _connect(self) -> MessageBus:
        where = self.address or "the default socket"
        try:
            bus = await bounded(MessageBus(bus_address=self.address, bus_type=BusType.SYSTEM).connect(),
                                CALL_TIMEOUT_S)
        except (OSError, DBusError, EOFError, asyncio.TimeoutError) as exc:
            raise SystemdError(
                f"cannot reach the system bus at {where}: {exc}",
                hint="is systemd (and dbus) running on this host? DBUS_SYSTEM_BUS_ADDRESS overrides the address",
            ) from exc
        try:
            bus.add_message_handler(self._dispatch)
            # Matches first (the bus keeps per-connection order), so no job's JobRemoved can slip past.
            for rule in (*_BASE_RULES, *self._rules):
                await self._raw(bus, DBUS, DBUS_PATH, DBUS, "AddMatch", "s", [rule])
            owner = await self._raw(bus, DBUS, DBUS_PATH, DBUS, "GetNameOwner", "s", [SYSTEMD])
            if owner.message_type is MessageType.ERROR:
                raise SystemdError(
                    f"systemd is not on the system bus at {where}",
                    hint="deployctl needs systemd as the init system of the host (or a sandbox's bus address)",
                )
            self.systemd_name = owner.body[0]
            await self._subscribe(bus)
        except BaseException:
            bus.disconnect()
            raise
        return bus

    async def _subscribe(self, bus: MessageBus) -> None:
        # PropertiesChanged only flows to subscribers; systemd keeps subscriptions across a reexec, so a
        # second Subscribe may answer AlreadySubscribed, which is what we want anyway.
        reply = await self._raw(bus, SYSTEMD, MANAGER_PATH, MANAGER, "Subscribe")
        if reply.message_type is MessageType.ERROR and reply.error_name != "org.freedesktop.systemd1.AlreadySubscribed":
            raise DBusError(reply.error_name or "org.freedesktop.DBus.Error.Failed", _text(reply))

    @staticmethod
    async def _raw(bus: MessageBus, dest: str, path: str, iface: str, member: str, signature: str = "",
                   body: list[Any] | None = None) -> Message:
        message = Message(destination=dest, path=path, interface=iface, member=member, signature=signature,
                          body=body or [])
        try:
            reply = await bounded(bus.call(message), CALL_TIMEOUT_S)
        except (OSError, EOFError) as exc:
            raise ConnectionLost(str(exc) or type(exc).__name__) from exc
        if reply is None:  # dbus-fast answers a call cut off by a clean EOF with no message at all
            raise ConnectionLost("the bus closed the connection")
        return reply

    def _dispatch(self, msg: Message) -> None:
        if msg.message_type is not MessageType.SIGNAL:
            return
        if msg.member == "NameOwnerChanged" and msg.sender == DBUS and msg.body and msg.body[0] == SYSTEMD:
            _name, old, new = msg.body
            log.info("systemd's bus name moved from %s to %s", old or "(none)", new or "(none)")
            self.systemd_name = new
            if new:  # a reexec'd systemd: it keeps subscribers, but say it again and re-read state
                task = asyncio.get_running_loop().create_task(self._after_reexec())
                self._background.add(task)  # held until done: the loop keeps only weak references
                task.add_done_callback(self._background.discard)
            return
        # Only systemd's own signals: a signal sent straight to this connection bypasses the match rules.
        if msg.sender == self.systemd_name:
            self._on_signal(msg)

    async def _after_reexec(self) -> None:
        bus = self._bus
        if bus is None:
            return
        try:
            await self._subscribe(bus)
        except (ConnectionLost, DBusError, asyncio.TimeoutError) as exc:
            log.warning("could not subscribe again after systemd moved on the bus: %s", exc)
        self._on_reconnect()

    def _use(self, bus: MessageBus) -> None:
        self._bus = bus
        if self._monitor is not None:
            self._monitor.cancel()
        self._monitor = asyncio.get_running_loop().create_task(self._reconnect_when_lost(bus))

    async def _reconnect_when_lost(self, bus: MessageBus) -> None:
        """Reconnect as soon as the connection ends, not at the next call: a watch waiting for a crash
        makes no call, and must not wait on a dead connection."""
        try:
            # Shielded: cancelling this monitor must not cancel the bus's own disconnect future.
            await asyncio.shield(bus.wait_for_disconnect())
        except Exception:  # noqa: BLE001 - how it ended does not matter, only that it did
            pass
        deadline = time.monotonic() + RETRY_WINDOW_S
        for attempt in range(1_000_000):
            if self._closed or self._bus is not bus:
                return
            try:
                await self._live(broken=bus)
                return
            except (SystemdError, ConnectionLost, asyncio.TimeoutError) as exc:
                if time.monotonic() > deadline:
                    log.warning("the bus connection is lost and could not be made again: %s", exc)
                    return
            await asyncio.sleep(_BACKOFF_S[min(attempt, len(_BACKOFF_S) - 1)])

    async def _live(self, broken: MessageBus | None = None) -> MessageBus:
        """The current connection, or a new one if it is gone (or is ``broken``)."""
        if self._closed:
            raise SystemdError("the connection to systemd was closed")
        if self._reconnecting is None:
            self._reconnecting = asyncio.Lock()
        async with self._reconnecting:
            bus = self._bus
            if bus is not None and bus.connected and bus is not broken:
                return bus
            if bus is not None:
                bus.disconnect()
            self._bus = None
            self._use(await self._connect())
            self.reconnects += 1
            log.warning("reconnected to systemd's bus (%d)", self.reconnects)
        self._on_reconnect()
        return self._bus

    async def call(self, dest: str, path: str, iface: str, member: str, signature: str = "",
                   body: list[Any] | None = None) -> Message:
        """The reply (maybe an ERROR message) to one call; a lost connection or a systemd briefly off the
        bus is retried for up to ``RETRY_WINDOW_S``; then ``SystemdError`` names the call."""
        deadline = time.monotonic() + RETRY_WINDOW_S
        attempt = 0
        broken: MessageBus | None = None
        problem = ""
        while True:
            bus = None
            try:
                bus = await self._live(broken)
                reply = await self._raw(bus, dest, path, iface, member, signature, body)
            except asyncio.TimeoutError as exc:
                # A connection that answers nothing for this long is not coming back either.
                raise SystemdError(f"systemd did not answer {member} within {CALL_TIMEOUT_S:g} s",
                                   hint="is PID 1 busy or stuck? see `journalctl -b -u init.scope`") from exc
            except ConnectionLost as exc:
                broken, problem = bus, f"lost the connection to the bus ({exc})"
            except SystemdError as exc:
                broken, problem = None, exc.message
            else:
                if reply.message_type is not MessageType.ERROR or reply.error_name not in _TRANSIENT:
                    return reply
                broken, problem = None, f"{reply.error_name}: {_text(reply)}"
            if time.monotonic() + _BACKOFF_S[min(attempt, len(_BACKOFF_S) - 1)] > deadline or self._closed:
                raise SystemdError(f"{member}: {problem} (still, after {RETRY_WINDOW_S:g} s of retrying)",
                                   hint="is systemd (and dbus) still running? `systemctl is-system-running`")
            log.info("%s: %s; trying again", member, problem)
            await asyncio.sleep(_BACKOFF_S[min(attempt, len(_BACKOFF_S) - 1)])
            attempt += 1

    async def add_rule(self, rule: str) -> None:
        self._rules[rule] += 1
        if self._rules[rule] == 1:
            try:
                await self.call(DBUS, DBUS_PATH, DBUS, "AddMatch", "s", [rule])
            except BaseException:
                del self._rules[rule]
                raise

    def remove_rule(self, rule: str) -> None:
        """Drop one use of ``rule``; the last one removes it without waiting (teardown never blocks)."""
        self._rules[rule] -= 1
        if self._rules[rule] > 0:
            return
        del self._rules[rule]
        bus = self._bus
        if bus is not None and bus.connected:
            sent = bus.send(Message(destination=DBUS, path=DBUS_PATH, interface=DBUS, member="RemoveMatch",
                                    signature="s", body=[rule], flags=MessageFlag.NO_REPLY_EXPECTED))
            sent.add_done_callback(lambda f: f.cancelled() or f.exception())


def _text(reply: Message) -> str:
    return reply.body[0] if reply.body and isinstance(reply.body[0], str) else ""
