"""What each reactor stall was: an investigation extension for ``bench/realcrawl.py --spy``.

A watchdog thread samples every thread's Python stack (``sys._current_frames()``) every
millisecond; a 5 ms reactor timer that fires 20 ms or more late records, for that stall, the
reactor's stacks in the window, the other threads' stacks, the longest gap between two samples
(the watchdog needs the GIL too, so a gap is a thread holding it in one long C call, or the
process off the CPU) with where every thread stood after it, the garbage collections that
overlapped it, and the CPU the process and the reactor thread used meanwhile (a stall with
little CPU is the machine's load, not the crawl). Written as JSON to ``STALLSPY_OUT`` when the
spider closes, longest stall first, with the collector's pauses.

It costs CPU (a thousand samples a second) and makes stalls a little longer: use it to find
out what the stalls are, not to measure how long they are.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import sys
import threading
import time
from collections import Counter, deque
from itertools import pairwise
from time import perf_counter
from types import FrameType
from typing import Any

from scrapy import Spider, signals
from scrapy.crawler import Crawler

_LATE_MS = 20.0


def _stack(frame: FrameType | None, depth: int = 10) -> list[str]:
    out = []
    while frame is not None and len(out) < depth:
        code = frame.f_code
        where = "/".join(code.co_filename.rsplit("/", 2)[-2:])
        out.append(f"{where}:{frame.f_lineno}:{code.co_name}")
        frame = frame.f_back
    return out


def _cpu() -> tuple[float, float]:
    """(CPU seconds of the process, of the calling thread)."""
    process = resource.getrusage(resource.RUSAGE_SELF)
    thread = resource.getrusage(resource.RUSAGE_THREAD)
    return process.ru_utime + process.ru_stime, thread.ru_utime + thread.ru_stime


class StallSpy:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.out = os.environ.get("STALLSPY_OUT", "stallspy.json")
        self.ring: deque[tuple[float, dict[str, list[str]]]] = deque(maxlen=3000)
        self.stalls: list[dict[str, Any]] = []
        self.collections: list[tuple[float, float, int, str]] = []  # start, s, generation, thread
        self.stopped = False
        self.reactor_thread = 0
        self.start = self.due = self._gc_start = 0.0
        self.cpu = (0.0, 0.0)
        self.call: Any = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StallSpy:
        spy = cls(crawler)
        crawler.signals.connect(spy.opened, signals.spider_opened)
        crawler.signals.connect(spy.closed, signals.spider_closed)
        return spy

    def opened(self, spider: Spider) -> None:
        self.reactor_thread = threading.get_ident()
        self.start = perf_counter()
        self.cpu = _cpu()
        gc.callbacks.append(self._gc)
        threading.Thread(target=self._sample, daemon=True, name="stallspy").start()
        self._arm()

    def _gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_start = perf_counter()
        else:
            self.collections.append((self._gc_start, perf_counter() - self._gc_start,
                                     info["generation"], threading.current_thread().name))

    def _sample(self) -> None:
        me = threading.get_ident()
        while not self.stopped:
            time.sleep(0.001)
            names = {t.ident: t.name for t in threading.enumerate()}
            now = perf_counter()
            snapshot = {
                "REACTOR" if tid == self.reactor_thread else names.get(tid, str(tid)):
                _stack(frame)
                for tid, frame in sys._current_frames().items() if tid != me
            }
            self.ring.append((now, snapshot))

    def _arm(self) -> None:
        from twisted.internet import reactor

        self.due = perf_counter() + 0.005
        self.call = reactor.callLater(0.005, self._fired)  # type: ignore[attr-defined]

    def _fired(self) -> None:
        now = perf_counter()
        late = (now - self.due) * 1000
        cpu = _cpu()
        process_ms = (cpu[0] - self.cpu[0]) * 1000
        reactor_ms = (cpu[1] - self.cpu[1]) * 1000
        self.cpu = cpu
        if late >= _LATE_MS:
            self.stalls.append(self._describe(late, now, process_ms, reactor_ms))
        self._arm()

    def _describe(self, late: float, now: float, process_ms: float, reactor_ms: float
                  ) -> dict[str, Any]:
        ring = list(self.ring)
        inside = [i for i, (t, _) in enumerate(ring) if self.due - 0.002 <= t <= now + 0.001]
        window = ring[max(0, inside[0] - 1): inside[-1] + 1] if inside else []
        reactor: Counter[str] = Counter()
        others: Counter[str] = Counter()
        gaps = []
        for (before, _), (t, snapshot) in pairwise(window):
            if t - before > 0.005:
                gaps.append((round((t - before) * 1000, 1), {
                    name: stack[:4] for name, stack in snapshot.items()
                    if stack and "threading.py" not in stack[0]
                }))
        for _, snapshot in window[1:]:
            for name, stack in snapshot.items():
                if name == "REACTOR":
                    reactor[" <- ".join(stack)] += 1
                elif stack and "threading.py" not in stack[0] and "queue.py" not in stack[0]:
                    others[f"{name}: {' <- '.join(stack[:6])}"] += 1
        return {
            "ms": round(late, 1), "at_s": round(self.due - self.start, 2),
            "process_cpu_ms": round(process_ms), "reactor_cpu_ms": round(reactor_ms),
            "samples": len(window),
            "gc": [(round(d * 1000, 1), g, thread) for t0, d, g, thread in self.collections
                   if t0 + d >= self.due and t0 <= now],
            "reactor": reactor.most_common(3), "others": others.most_common(3),
            "longest_gaps": sorted(gaps, key=lambda g: -g[0])[:2],
        }

    def closed(self, spider: Spider, reason: str) -> None:
        self.stopped = True
        if self.call is not None and self.call.active():
            self.call.cancel()
        gc.callbacks.remove(self._gc)
        pauses = sorted((round(d * 1000, 1), g, thread) for _, d, g, thread in self.collections)
        with open(self.out, "w") as f:
            json.dump({
                "gc_pauses_over_5ms": [p for p in pauses if p[0] > 5][-30:],
                "gc_total_ms": round(sum(p[0] for p in pauses)),
                "gc_full_collections": sum(1 for p in pauses if p[1] == 2),
                "stalls": sorted(self.stalls, key=lambda s: -s["ms"]),
            }, f, indent=1)
