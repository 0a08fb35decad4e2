#!/usr/bin/env python3
"""Create latency of one stack: COUNT creates of template minimal, one
after the other, each deleted (untimed) before the next; p50/p90 of the
POST as a client sees it. --network none creates them with
"network":{"mode":"none"} (no slot, no gateway), the default with a
network slot and gateway: the issue's "create latency with a network
beside without" (goal: +<= 3 ms p50). bench/netcreate.sh runs both.

usage: netcreate.py --url URL --key-file FILE --label L [--driver ns]
                    [--network on|none] [--count 40] [--pause 0.3]"""
import time

import stack
from stack import pct


def main():
    ap = stack.parser(__doc__, state=False)
    ap.add_argument("--label", required=True)
    ap.add_argument("--driver", default="ns")
    ap.add_argument("--network", choices=("on", "none"), default="on")
    ap.add_argument("--count", type=int, default=40)
    # Between creates: the warm pool and the ready slots refill, as they
    # would between a client's creates.
    ap.add_argument("--pause", type=float, default=0.3)
    args = stack.parse(ap)
    api = args.api
    body = {"template": "minimal", "driver": args.driver}
    if args.network == "none":
        body["network"] = {"mode": "none"}
    times = []
    for i in range(args.count + 3):
        t0 = time.monotonic()
        r = api.request("POST", "/v1/sandboxes", body)
        ms = (time.monotonic() - t0) * 1000
        assert r.status_code == 201, f"create: {r.status_code} {r.text}"
        if i >= 3:  # the first ones warm the stack's caches
            times.append(ms)
        api.request("DELETE", f"/v1/sandboxes/{r.json()['id']}")
        time.sleep(args.pause)
    print(f"  {args.label:<22} {args.driver:<3} n={len(times):<4} "
          f"p50 {pct(times, 50):7.2f} ms  p90 {pct(times, 90):7.2f} ms")


if __name__ == "__main__":
    main()
