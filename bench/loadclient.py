"""A small HTTP/1.1 load client for the page benchmarks: raw asyncio connections kept alive,
each sending its next request as soon as the last answer is read in full, spread over a few
processes so the client is not what limits the rate.

``LoadClient.run`` returns, for one URL, the latency of every answer completed in the measured
window (which follows a warm-up), so their number over the window's length is the throughput;
any status other than the one expected counts as an error.
"""

import asyncio
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context


@dataclass
class LoadResult:
    # Seconds each answer took, of the answers completed in the measured window.
    latencies: list[float] = field(default_factory=list)
    seconds: float = 0.0  # length of the measured window
    errors: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    body_bytes: int = 0  # size of the last answer's body

    def merge(self, other: "LoadResult") -> None:
        self.latencies.extend(other.latencies)
        self.seconds = max(self.seconds, other.seconds)
        self.errors += other.errors
        for status, n in other.statuses.items():
            self.statuses[status] = self.statuses.get(status, 0) + n
        self.body_bytes = max(self.body_bytes, other.body_bytes)


def request_bytes(host: str, port: int, path: str, headers: dict[str, str]) -> bytes:
    lines = [f"GET {path} HTTP/1.1", f"Host: {host}:{port}", "Accept-Encoding: identity"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _read_answer(reader: asyncio.StreamReader) -> tuple[int, int, bool]:
    """(status, body length, keep-alive) of one answer, its body read in full."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    length = None
    chunked = False
    keep_alive = True
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name = name.strip().lower()
        value = value.strip()
        if name == "content-length":
            length = int(value)
        elif name == "transfer-encoding" and "chunked" in value.lower():
            chunked = True
        elif name == "connection" and value.lower() == "close":
            keep_alive = False
    if chunked:
        size = 0
        while True:
            chunk_head = await reader.readuntil(b"\r\n")
            chunk = int(chunk_head.split(b";")[0], 16)
            await reader.readexactly(chunk + 2)
            size += chunk
            if chunk == 0:
                return status, size, keep_alive
    if length is None:
        body = await reader.read()
        return status, len(body), False
    await reader.readexactly(length)
    return status, length, keep_alive


async def _connection(host, port, payload, expect, warm_until, stop_at, result: LoadResult):
    reader, writer = await asyncio.open_connection(host, port)
    try:
        while True:
            started = time.perf_counter()
            if started >= stop_at:
                return
            writer.write(payload)
            status, size, keep_alive = await _read_answer(reader)
            done = time.perf_counter()
            if warm_until <= done <= stop_at:
                result.latencies.append(done - started)
                result.statuses[status] = result.statuses.get(status, 0) + 1
                if status != expect:
                    result.errors += 1
            result.body_bytes = size
            if not keep_alive:
                writer.close()
                reader, writer = await asyncio.open_connection(host, port)
    finally:
        writer.close()


async def _load(host, port, payload, expect, connections, start_at, warmup, seconds) -> LoadResult:
    result = LoadResult()
    warm_until = start_at + warmup
    stop_at = warm_until + seconds
    await asyncio.sleep(max(0.0, start_at - time.perf_counter()))
    await asyncio.gather(
        *(
            _connection(host, port, payload, expect, warm_until, stop_at, result)
            for _ in range(connections)
        )
    )
    result.seconds = seconds
    return result


def _worker(host, port, payload, expect, connections, start_at, warmup, seconds) -> LoadResult:
    return asyncio.run(_load(host, port, payload, expect, connections, start_at, warmup, seconds))


class LoadClient:
    """``processes`` client processes sharing ``connections`` kept-alive connections."""

    def __init__(self, *, connections: int = 20, processes: int | None = None):
        self.connections = connections
        self.processes = max(1, min(processes or min(4, os.cpu_count() or 1), connections))
        # spawn: the client processes carry nothing of the parent (no Django, no database).
        self.pool = ProcessPoolExecutor(self.processes, mp_context=get_context("spawn"))
        # Start them now, not inside the first measurement.
        list(self.pool.map(int, range(self.processes)))

    def close(self) -> None:
        self.pool.shutdown()

    def __enter__(self) -> "LoadClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def run(
        self,
        host: str,
        port: int,
        path: str,
        headers: dict[str, str],
        *,
        seconds: float,
        warmup: float,
        expect: int = 200,
    ) -> LoadResult:
        payload = request_bytes(host, port, path, headers)
        shares = [
            self.connections // self.processes + (i < self.connections % self.processes)
            for i in range(self.processes)
        ]
        # perf_counter is the same clock in every process on one machine (CLOCK_MONOTONIC).
        start_at = time.perf_counter() + 0.2
        futures = [
            self.pool.submit(_worker, host, port, payload, expect, n, start_at, warmup, seconds)
            for n in shares
            if n
        ]
        total = LoadResult()
        for future in futures:
            total.merge(future.result())
        return total
