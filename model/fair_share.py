#!/usr/bin/env python3
"""An ideal scheduler of `lifo simulate --mix tenants`, to see what bounds the fair share.

Five slots, runs of 500 ms +- 50% (uniform), nine tenants at 0.67 tasks/s each and tenant-0 at
6.7/s (Poisson), a TTL of 20 s. No reads, no claims, no wake-ups: a free slot is filled the
instant it frees, each tenant gives its newest task. It prints, per policy, the other nine's p95
wait with tenant-0 against without it (the ratio `lifo simulate --mix tenants` reports, here
with zero overhead: the queue's own time to start a task is left out of both) and tenant-0's
starts per second, over three seeds of 2,000 s of steady state each (the nine's arrivals are
the same with tenant-0 and without):

- by service: the least served in the last 10 s first (the first fair share);
- by waiting: under the most served, the one waiting longest first (since its newest task, or
  its last start if later); the most served last (process::select::fair; ported to Rust as
  crates/lifo-lab/src/ideal.rs, which `lifo simulate --mix tenants` runs on the real arrivals);
- plus a hold: a slot that only tenant-0 wants, while another tenant started in the last
  second, is kept free for up to this long;
- plus a reserve: tenant-0 never takes the last free slot while another tenant started in the
  last second;
- plus a cap: tenant-0 never has more than this many running (TenantMaxInFlight; 4 is
  RunnerMaxConcurrency - 1), slots free or not.

Run: python3 model/fair_share.py
"""
import collections
import heapq
import random

WINDOW = 10.0
SLOTS = 5
TTL = 20.0


def run(seed, heavy, order, hold=0.0, reserve=0, cap=None, seconds=2000.0):
    # Each tenant's arrivals from its own generator, so the nine's are the
    # same with tenant-0 and without; run times from another.
    runs = random.Random(f"{seed}-runs")
    rates = [6.7 if heavy else 0.0] + [0.6667] * 9
    events = []
    for tenant, rate in enumerate(rates):
        arrivals = random.Random(f"{seed}-{tenant}")
        t = 0.0
        while rate > 0:
            t += arrivals.expovariate(rate)
            if t > seconds:
                break
            heapq.heappush(events, (t, 0, tenant))
    free = SLOTS
    waiting = collections.defaultdict(list)
    starts = collections.defaultdict(collections.deque)
    waits = collections.defaultdict(list)
    held_until = None
    running0 = 0

    def served(tenant, now):
        d = starts[tenant]
        while d and now - d[0] >= WINDOW:
            d.popleft()
        return len(d)

    def pick(now, tenants):
        top = max(served(t, now) for t in list(starts) + tenants)
        if order == "service":
            return min(tenants, key=lambda t: (served(t, now), -waiting[t][-1]))

        def since(t):
            last = starts[t][-1] if starts[t] else float("-inf")
            return max(waiting[t][-1], last)

        return min(tenants, key=lambda t: (served(t, now) >= top, since(t)))

    def others_active(now):
        return any(starts[t] and now - starts[t][-1] < 1.0 for t in range(1, 10))

    def fill(now):
        nonlocal free, held_until, running0
        while free > 0:
            for t in list(waiting):
                waiting[t] = [a for a in waiting[t] if now - a <= TTL]
            tenants = [t for t in waiting if waiting[t] and (cap is None or t != 0 or running0 < cap)]
            if not tenants:
                return
            t = pick(now, tenants)
            if t == 0 and heavy and others_active(now):
                if free <= reserve:
                    return
                if hold > 0:
                    if held_until is None:
                        held_until = now + hold
                        heapq.heappush(events, (held_until, 2, None))
                        return
                    if now < held_until:
                        return
            held_until = None
            arrived = waiting[t].pop()
            waits[t].append(now - arrived)
            starts[t].append(now)
            free -= 1
            running0 += t == 0
            heapq.heappush(events, (now + runs.uniform(0.25, 0.75), 1, t))

    while events:
        now, kind, tenant = heapq.heappop(events)
        if kind == 0:
            waiting[tenant].append(now)
        elif kind == 1:
            free += 1
            running0 -= tenant == 0
        fill(now)
    # Shed tasks (none of the nine's are) do not count, as in the mix.
    others = sorted(w for t in range(1, 10) for w in waits[t])
    return others[int(0.95 * len(others))], len(waits[0]) / seconds


def main():
    print("| policy | p95 with tenant-0 / without (3 seeds) | tenant-0 starts/s |")
    print("|---|---|---|")
    for label, order, hold, reserve, cap in [
        ("by service", "service", 0.0, 0, None),
        ("by waiting (process::select::fair)", "waiting", 0.0, 0, None),
        ("by waiting, hold 50 ms", "waiting", 0.05, 0, None),
        ("by waiting, hold 100 ms", "waiting", 0.1, 0, None),
        ("by waiting, reserve 1 slot", "waiting", 0.0, 1, None),
        ("by waiting, tenant-0 capped at 4 running", "waiting", 0.0, 0, 4),
        ("by waiting, tenant-0 capped at 2 running", "waiting", 0.0, 0, 2),
    ]:
        ratios, rates = [], []
        for seed in range(3):
            alone, _ = run(seed, False, order)
            mixed, rate = run(seed, True, order, hold, reserve, cap)
            ratios.append(f"{mixed:.2f}/{alone:.2f} s = {mixed / alone:.2f}x")
            rates.append(rate)
        print(f"| {label} | {'; '.join(ratios)} | {sum(rates) / len(rates):.2f} |")


if __name__ == "__main__":
    main()
