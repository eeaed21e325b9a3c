"""A network cable with a delay, in user space: two TAP devices, each frame copied to the other
``DELAY_MS`` after it arrived, in order.

Why not ``tc netem``: the test machine's kernel (a Firecracker VM's) is built without
``sch_netem`` and cannot load modules, so the delay is made here, on layer 2, where the kernel on
both sides still sees an Ethernet link. Run inside the hub namespace (the TAPs are created
there); the caller moves one end into a host's namespace once this prints ``ready``.

    python tests/support/cable.py TAP_A TAP_B DELAY_MS
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import fcntl
import os
import struct
import sys

TUNSETIFF = 0x400454CA
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000


def open_tap(name: str) -> int:
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TAP | IFF_NO_PI))
    return fd


class Direction:
    """Frames read from ``source``, written to ``sink`` once each is ``delay_s`` old."""

    def __init__(self, loop: asyncio.AbstractEventLoop, source: int, sink: int, delay_s: float):
        self.loop, self.source, self.sink, self.delay_s = loop, source, sink, delay_s
        self.queue: collections.deque[tuple[float, bytes]] = collections.deque()
        loop.add_reader(source, self.read)

    def read(self) -> None:
        while True:
            try:
                frame = os.read(self.source, 65536)
            except BlockingIOError:
                return
            if not self.queue:
                self.loop.call_later(self.delay_s, self.drain)
            self.queue.append((self.loop.time() + self.delay_s, frame))

    def drain(self) -> None:
        now = self.loop.time()
        while self.queue and self.queue[0][0] <= now:
            _, frame = self.queue.popleft()
            # The other end down or full: the frame is lost, as on a wire.
            with contextlib.suppress(OSError):
                os.write(self.sink, frame)
        if self.queue:
            self.loop.call_at(self.queue[0][0], self.drain)


async def main(tap_a: str, tap_b: str, delay_ms: float) -> None:
    loop = asyncio.get_running_loop()
    a, b = open_tap(tap_a), open_tap(tap_b)
    Direction(loop, a, b, delay_ms / 1000.0)
    Direction(loop, b, a, delay_ms / 1000.0)
    print("ready", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3])))
