#!/usr/bin/env python3
"""Helpers of bench/top-churn.sh (doc/reference/BENCHMARKS.md, "The live view").

  top-churn.py opens LOG        every 10 ms, log "wall_time opens": the namespace's TCP
                                ActiveOpens + PassiveOpens (/proc/net/snmp), one per socket
  top-churn.py analyse RATE BYTES CHURN_JSON TOP_JSON OPENS_LOG
                                the view's short connections and bytes per refresh against the
                                sockets the kernel opened over the same interval
"""

import bisect
import json
import statistics
import sys
import time


def opens_now():
    with open("/proc/net/snmp") as f:
        rows = [line.split() for line in f if line.startswith("Tcp:")]
    d = dict(zip(rows[0][1:], rows[1][1:]))
    return int(d["ActiveOpens"]) + int(d["PassiveOpens"])


def log_opens(path):
    with open(path, "w", buffering=1) as out:
        while True:
            out.write(f"{time.time():.6f} {opens_now()}\n")
            time.sleep(0.01)


def analyse(rate, nbytes, churn, top, opens):
    rate, nbytes = float(rate), float(nbytes)
    with open(churn) as f:
        achieved = json.load(f)["rate"]
    with open(top) as f:
        rows = [json.loads(line) for line in f]
    ts, vs = [], []
    with open(opens) as f:
        for line in f:
            t, v = line.split()
            ts.append(float(t))
            vs.append(int(v))

    def opened_at(t):
        i = bisect.bisect_left(ts, t)
        if i <= 0 or i >= len(ts):
            return None
        t0, t1, v0, v1 = ts[i - 1], ts[i], vs[i - 1], vs[i]
        return v0 + (v1 - v0) * (t - t0) / (t1 - t0)

    from datetime import datetime

    print(f"sockchurn achieved {achieved:.0f} connections/s (target {rate:.0f}): "
          f"{2 * achieved:.0f} sockets/s, {2 * achieved * nbytes:.0f} bytes/s each way")
    print("short_connections_counted:", sorted({r["short_connections_counted"] for r in rows}))
    print("refresh interval_s short_conns kernel_opens error send_B/s recv_B/s "
          "(2 x BYTES x opens/2 expected)")
    errs, berrs = [], []
    for k, r in enumerate(rows):
        end = datetime.fromisoformat(r["time"].replace("Z", "+00:00")).timestamp()
        a, b = opened_at(end - r["interval_s"]), opened_at(end)
        t = r["totals"]
        if a is None or b is None:
            continue
        opened = b - a
        err = (t["short_connections"] - opened) / opened * 100
        expect_bytes = opened * nbytes / r["interval_s"]
        berr = (t["send_bytes_per_sec"] - expect_bytes) / expect_bytes * 100
        errs.append(err)
        berrs.append(berr)
        print(f"{k + 1:>3} {r['interval_s']:.3f} {t['short_connections']:>6} {opened:>8.0f} "
              f"{err:>+6.1f}% {t['send_bytes_per_sec']:>9} {t['recv_bytes_per_sec']:>9} "
              f"{berr:>+6.1f}%")
    print(f"short connections against the kernel's opens: median {statistics.median(errs):+.1f} %, "
          f"worst {max(errs, key=abs):+.1f} %; bytes: median {statistics.median(berrs):+.1f} %, "
          f"worst {max(berrs, key=abs):+.1f} %")
    tot = [r["totals"] for r in rows]
    print("closed_uncounted (sum)", sum(t["closed_uncounted"] for t in tot),
          "; time_wait (last)", tot[-1]["time_wait"])
    print("warnings of the last refresh:", ", ".join(w["code"] for w in rows[-1]["warnings"]))


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    {"opens": log_opens, "analyse": analyse}[cmd](*args)


if __name__ == "__main__":
    main()
