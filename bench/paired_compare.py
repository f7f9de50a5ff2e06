#!/usr/bin/env python3
"""Paired comparison of two methods from `ripplekv eval --records-out` records.

Usage:
  bench/paired_compare.py RECORDS.jsonl --a ripple+snapkv --b snapkv [--markdown]

For each budget and task present for both methods: the mean of the per-example difference
a - b, its 95% confidence interval (Student t, n - 1 degrees of freedom), and how many examples
a wins, ties and loses (for fidelity/kl and fidelity/delta_nll lower is better, so a "win" is a
lower value). The examples are the same for both methods (one prefill serves all), so the paired
interval is much tighter than the difference of the two per-method intervals.
"""

import argparse
import json
import math
from collections import defaultdict

LOWER_IS_BETTER = ("fidelity/kl", "fidelity/delta_nll")


def t975(df):
    """Two-sided 95% Student t critical value by bisection on the regularized incomplete beta."""
    def betacf(a, b, x):
        qab, qap, qam = a + b, a + 1, a - 1
        c, d = 1.0, 1 - qab * x / qap
        d = 1 / d
        h = d
        for m in range(1, 300):
            m2 = 2 * m
            aa = m * (b - m) * x / ((qam + m2) * (a + m2))
            d = 1 + aa * d
            c = 1 + aa / c
            d = 1 / d
            h *= d * c
            aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
            d = 1 + aa * d
            c = 1 + aa / c
            d = 1 / d
            h *= d * c
        return h

    def ibeta(a, b, x):
        if x <= 0 or x >= 1:
            return 0.0 if x <= 0 else 1.0
        bt = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) +
                      a * math.log(x) + b * math.log(1 - x))
        if x < (a + 1) / (a + b + 2):
            return bt * betacf(a, b, x) / a
        return 1 - bt * betacf(b, a, 1 - x) / b

    def tail(t):  # P(|T| > t)
        return ibeta(df / 2, 0.5, df / (df + t * t))

    lo, hi = 0.0, 1000.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if tail(mid) > 0.05:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("records")
    ap.add_argument("--a", required=True)
    ap.add_argument("--b", required=True)
    args = ap.parse_args()
    scores = defaultdict(dict)  # (method, budget, task) -> example -> score
    with open(args.records) as f:
        for line in f:
            r = json.loads(line)
            scores[(r["method"], r["budget"], r["task"])][r["example"]] = r["score"]
    keys = sorted({(b, t) for (m, b, t) in scores if m == args.a and (args.b, b, t) in scores},
                  key=lambda k: (k[1], k[0]))
    print(f"| budget | task | n | mean {args.a} - {args.b} | 95% CI | {args.a} better / tie / worse |")
    print("|--:|:--|--:|--:|--:|--:|")
    for budget, task in keys:
        a, b = scores[(args.a, budget, task)], scores[(args.b, budget, task)]
        common = sorted(set(a) & set(b))
        diffs = [a[e] - b[e] for e in common]
        n = len(diffs)
        mean = sum(diffs) / n
        hw = float("nan")
        if n > 1:
            sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1))
            hw = t975(n - 1) * sd / math.sqrt(n)
        sign = -1 if task in LOWER_IS_BETTER else 1
        better = sum(1 for d in diffs if sign * d > 0)
        worse = sum(1 for d in diffs if sign * d < 0)
        print(f"| {budget} | {task} | {n} | {mean:+.4f} | ±{hw:.4f} | {better} / {n - better - worse} / {worse} |")


if __name__ == "__main__":
    main()
