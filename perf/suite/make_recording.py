#!/usr/bin/env python3
"""A synthetic recording (format v1, api/record-format.md) written from the format's page,
for tw-perf replay's test: what tickwheel would record of a small program, with the runs the
engine's rules give (dues on the 1 ms grid, a periodic task's next due its previous plus its
period, a one-shot due its last delay after its last reset).

Two threads. Thread 1: 60 heartbeats (periods 50-190 ms; one of them 2 ms long, so replay
sleeps it), a third of them cancelled around 2 s and the rest around 2.8 s (no due near the
end), one given a new period, one paused and resumed, one added at an absolute due; an ADD
that failed. Thread 2: 200 session timeouts of 400 ms reset in batches (tw_set_delay_many)
every 150 ms, a fifth of them cancelled, one moved by tw_set_due; a cancel of an id never
added; three of thread 1's heartbeats given their own period again as they are added (the
replay may have to wait for the add). An event of a type v1 does not define, and a DROPPED
event.

  make_recording.py OUT          writes OUT; prints what it holds as JSON
  make_recording.py OUT --extra-run-us N    the same with every run N us longer (a program
                                 whose callbacks got slower: examples/latency_ci.sh's test)
"""
import json
import struct
import sys

MS = 1_000_000
START = 10 ** 12  # the engine's clock at the start: on the ms grid
END = START + 3000 * MS
MAGIC = b"\x89TWRECD\n"
ADD, SET_DELAY, SET_DUE, SET_PERIOD, PAUSE, RESUME, CANCEL = 1, 2, 3, 4, 5, 6, 7
RUN, THREAD, DROPPED, END_T = 16, 32, 33, 34
EINVAL, ENOTFOUND = 1, 2


def ceil_ms(t):
    return -(-t // MS) * MS


def event(typ, thread, t, ident=0, result=0, u=0, a=0, b=0, c=0, tail=b""):
    assert len(tail) % 8 == 0
    return struct.pack("<BBHIQQiIQQQ", typ, 0, thread, len(tail), t, ident, result, u,
                       a, b, c) + tail


def padded(data):
    return data + b"\0" * (-len(data) % 8)


def add_tail(name=b"", cron=b""):
    return padded(struct.pack("<HHI", len(name), len(cron), 0) + name + cron)


class Rec:
    def __init__(self, extra_run_ns=0):
        self.extra_run_ns = extra_run_ns  # a slower callback: every run this much longer
        self.events = []  # (sort time, seq, bytes)
        self.ops = 0
        self.runs = 0
        self.left_out = 0

    def put(self, t, data):
        self.events.append((t, len(self.events), data))

    def op(self, typ, thread, t, ident, **kw):
        self.ops += 1
        self.put(t, event(typ, thread, t, ident, **kw))

    def run(self, ident, due, n, length_ns, result=0):
        length_ns += self.extra_run_ns
        start = due + 50_000
        self.runs += 1
        self.put(start + length_ns, event(RUN, 0, start, ident, result, 0, due,
                                          start + length_ns, n))

    def periodic_runs(self, ident, dues, length_ns):
        for n, due in enumerate(dues, 1):
            self.run(ident, due, n, length_ns + (n % 5) * 10_000)


def dues_between(first, period, until):
    out, d = [], first
    while d < until:
        out.append(d)
        d += period
    return out


def quiet_time(target, dues, margin=5 * MS):
    """A time near target no due lies within margin of, so the engine's answer is sure."""
    t = target
    while any(abs(d - t) < margin for d in dues):
        t += MS
    return t


def heartbeats(r):
    for i in range(60):
        ident, t = 1000 + i, START + (10 + 2 * i) * MS
        delay, period = (20 + i % 30) * MS, (50 + (i * 7) % 150) * MS
        name = b"beat-%d" % i if i % 10 == 0 else b""
        r.op(ADD, 1, t, ident, u=0, a=delay // MS, b=period // MS, tail=add_tail(name))
        first = ceil_ms(t) + delay
        dues = dues_between(first, period, END)
        if i == 3:  # a new period from the due after the next one
            at = quiet_time(START + 1000 * MS, dues)
            r.op(SET_PERIOD, 1, at, ident, a=80)
            nxt = next(d for d in dues if d > at)
            dues = [d for d in dues if d <= nxt] + dues_between(nxt + 80 * MS, 80 * MS,
                                                                END)
        elif i == 4:  # paused 300 ms: resumed at now + period
            p_at = quiet_time(START + 1200 * MS, dues)
            r.op(PAUSE, 1, p_at, ident)
            r_at = START + 1500 * MS + 500_000
            r.op(RESUME, 1, r_at, ident)
            dues = [d for d in dues if d < p_at] + dues_between(ceil_ms(r_at) + period,
                                                                period, END)
        if i % 3 == 0 or i in (3, 4):
            at = quiet_time(START + (2000 + i) * MS, dues)
        else:  # the rest at the end, so that no due lies near it
            at = quiet_time(START + (2800 + i) * MS, dues)
        r.op(CANCEL, 1, at, ident)
        dues = [d for d in dues if d < at]
        r.periodic_runs(ident, dues, 2 * MS if i == 7 else 40_000 + i * 3000)
    # a periodic task at an absolute due, the engine's grid
    t = START + 300 * MS
    r.op(ADD, 1, t, 1100, u=1 << 16, a=0, b=100, c=START + 500 * MS, tail=add_tail())
    dues = dues_between(START + 500 * MS, 100 * MS, END)
    at = quiet_time(START + 2850 * MS, dues)
    r.op(CANCEL, 1, at, 1100)
    r.periodic_runs(1100, [d for d in dues if d < at], 100_000)
    # the program's mistake: an ADD refused (id 0), left out by the replay
    r.op(ADD, 1, START + 400 * MS, 0, result=-EINVAL, a=5, b=5, tail=add_tail())
    r.left_out += 1


def sessions(r):
    added = {}
    for i in range(200):
        ident, t = 5000 + i, START + (5 + i) * MS
        r.op(ADD, 2, t, ident, a=400, tail=add_tail())
        added[ident] = t
    last = dict(added)
    for f in range(8):  # frames: a batch of resets each, as one tw_set_delay_many
        t = START + (155 + 150 * f) * MS + 300_000
        for i in range(200):
            ident = 5000 + i
            if added[ident] < t and f < i % 8:
                r.op(SET_DELAY, 2, t, ident, u=1, a=400)
                last[ident] = t
    for i in range(200):
        ident = 5000 + i
        due = ceil_ms(last[ident]) + 400 * MS
        if i == 1:  # moved by an absolute due, to 250 ms after its last reset
            at = last[ident] + 10 * MS
            r.op(SET_DUE, 2, at, ident, a=last[ident] + 250 * MS)
            due = ceil_ms(last[ident] + 250 * MS)
        if i % 5 == 0:
            r.op(CANCEL, 2, last[ident] + 200 * MS, ident)
            continue
        r.run(ident, due, 1, 30_000 + i * 500, result=1 if i == 13 else 0)
    r.op(CANCEL, 2, START + 2500 * MS, 777777, result=-ENOTFOUND)  # never added
    r.left_out += 1
    # heartbeats thread 1 adds, given their own period again by thread 2 (no change to
    # their runs) at the time of the add: the replay may have to wait for the add
    for i in (10, 20, 30):
        r.op(SET_PERIOD, 2, START + (10 + 2 * i) * MS, 1000 + i, a=50 + (i * 7) % 150)


def build(extra_run_ns=0):
    r = Rec(extra_run_ns)
    r.put(START + 1000, event(THREAD, 1, START + 1000, a=4001, tail=padded(b"beats")))
    r.put(START + 2000, event(THREAD, 2, START + 2000, a=4002, tail=padded(b"sessions")))
    heartbeats(r)
    sessions(r)
    r.put(START + 600 * MS, event(99, 0, START + 600 * MS, tail=b"\xff" * 16))
    # a gap the recorder reports (nothing is missing here: the replay must only warn)
    r.put(START + 2200 * MS, event(DROPPED, 0, START + 2200 * MS, a=3))
    header = MAGIC + struct.pack("<IIQQIIIIQI4x", 1, 64, START, 1_700_000_000 * 10 ** 9,
                                 2, 0, 4242, 0, 5000, 10)
    body = [e for _, _, e in sorted(r.events)]
    body.append(event(END_T, 0, END, a=len(body) + 1, b=3, c=END))
    return header + b"".join(body), r


def main():
    args = sys.argv[1:]
    extra_us = 0
    if len(args) == 3 and args[1] == "--extra-run-us" and args[2].isdigit():
        extra_us = int(args[2])
        args = args[:1]
    if len(args) != 1:
        sys.exit(__doc__)
    data, r = build(extra_us * 1000)
    with open(args[0], "wb") as f:
        f.write(data)
    print(json.dumps({"ops": r.ops, "runs": r.runs, "left_out": r.left_out,
                      "bytes": len(data)}))


if __name__ == "__main__":
    main()
