#!/usr/bin/env python3
"""Prints the table of docs/BENCHMARKS.md section 9 from the last
`cargo bench -p robust-bench --bench tower_layer` run.

Reads criterion's estimates (mean point estimates, in ns) under $CARGO_TARGET_DIR/criterion, or
target/criterion. Every ratio compares numbers measured in the same run: the times per call, and
the layers' own cost (time per call minus the bare service's, from the same group).
"""
import json
import os
import sys

TARGET = os.environ.get("CARGO_TARGET_DIR") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "target")
ROOT = os.path.join(TARGET, "criterion")
GROUPS = [
    ("tower_layer", "http request, no timeout"),
    ("tower_layer_timeout", "http request, 2 s timeout"),
    ("tower_layer_u32", "u32 request, no timeout"),
]
VARIANTS = ["bare", "robust", "robust_static", "tower_retry", "resilience"]


def ns(group, name):
    path = os.path.join(ROOT, group, name, "new", "estimates.json")
    with open(path) as f:
        return json.load(f)["mean"]["point_estimate"]


def main():
    print("| request, timeout | bare | robust | robust (static) | tower retry | tower-resilience "
          "| robust / tower | robust / resilience | static / tower | static / resilience "
          "| layer cost: robust / tower | layer cost: static / tower |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for group, label in GROUPS:
        try:
            t = {v: ns(group, v) for v in VARIANTS}
        except FileNotFoundError as e:
            sys.exit(f"missing {e.filename}: run `cargo bench -p robust-bench --bench tower_layer`")
        cost = {v: t[v] - t["bare"] for v in VARIANTS}
        print(f"| {label} | {t['bare']:.1f} | {t['robust']:.1f} | {t['robust_static']:.1f} | "
              f"{t['tower_retry']:.1f} | {t['resilience']:.1f} | "
              f"{t['robust'] / t['tower_retry']:.2f} | {t['robust'] / t['resilience']:.2f} | "
              f"{t['robust_static'] / t['tower_retry']:.2f} | "
              f"{t['robust_static'] / t['resilience']:.2f} | "
              f"{cost['robust'] / cost['tower_retry']:.2f} | "
              f"{cost['robust_static'] / cost['tower_retry']:.2f} |")


main()
