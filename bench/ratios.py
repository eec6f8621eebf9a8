#!/usr/bin/env python3
"""Prints the ratio table of docs/BENCHMARKS.md from the last `cargo bench -p robust-bench` run.

Reads criterion's estimates under target/criterion (mean point estimates, in ns). Every ratio
compares numbers measured in the same run.
"""
import json
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "target", "criterion")


def ns(group, name):
    path = os.path.join(ROOT, group, name, "new", "estimates.json")
    with open(path) as f:
        return json.load(f)["mean"]["point_estimate"]


def main():
    try:
        s = {k: ns("sync_success", k) for k in ["direct", "robust", "hand", "backon"]}
        a = {k: ns("async_success_timeout", k) for k in ["direct", "robust", "hand", "backon"]}
        r = {k: ns("retry_path", k) for k in
             ["robust_0", "robust_2", "hand_0", "hand_2", "backon_0", "backon_2"]}
    except FileNotFoundError as e:
        sys.exit(f"missing {e.filename}: run `cargo bench -p robust-bench --bench overhead` first")

    print("| measurement | #[robust] | direct | hand-written | backon | robust / hand | robust / backon |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    print(f"| 1. sync success (ns/call) | {s['robust']:.2f} | {s['direct']:.2f} | {s['hand']:.2f} | "
          f"{s['backon']:.2f} | {s['robust'] / s['hand']:.3f} | {s['robust'] / s['backon']:.3f} |")
    print(f"| 2. async success, 2 s timeout (ns/call) | {a['robust']:.2f} | {a['direct']:.2f} | "
          f"{a['hand']:.2f} | {a['backon']:.2f} | {a['robust'] / a['hand']:.3f} | "
          f"{a['robust'] / a['backon']:.3f} |")
    per = {k: (r[f"{k}_2"] - r[f"{k}_0"]) / 2 for k in ["robust", "hand", "backon"]}
    print(f"| 3. cost per retry, no backoff (ns) | {per['robust']:.2f} | | {per['hand']:.2f} | "
          f"{per['backon']:.2f} | {per['robust'] / per['hand']:.3f} | {per['robust'] / per['backon']:.3f} |")
    print()
    print("| strategy / jitter | ns per computation |")
    print("|---|---:|")
    for group in ["backoff", "jitter"]:
        d = os.path.join(ROOT, group)
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            if name == "report":
                continue
            print(f"| {group} {name} | {ns(group, name):.2f} |")


main()
