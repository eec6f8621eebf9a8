#!/usr/bin/env python3
"""Whole-process timing of the success path: each `#[robust]` variant against its hand-written
loop with the same settings (`on = [Io]`), run interleaved, N calls a process.

    cargo build --release -p robust-bench --bin success_path
    python3 bench/success_path.py [N] [ROUNDS]

Prints the median wall time of each variant and the ratio robust / hand-written (the minimum
over rounds too, the least disturbed by other load on the machine).
"""
import statistics
import subprocess
import sys
import time

N = sys.argv[1] if len(sys.argv) > 1 else "100000000"
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 7
BIN = "target/release/success_path"
PAIRS = [
    ("robust_sync_io", "hand_sync_io"),
    ("robust_async_io", "hand_async_io"),
    ("robust_async_plain_io", "hand_async_plain_io"),
]

times = {v: [] for pair in PAIRS for v in pair}
for _ in range(ROUNDS):
    for pair in PAIRS:
        for v in pair:
            t = time.perf_counter()
            out = subprocess.run([BIN, v, N], capture_output=True, text=True, check=True)
            times[v].append(time.perf_counter() - t)
            assert out.stdout.strip(), v

print(f"{N} calls a process, {ROUNDS} rounds, interleaved")
print("| variant | median (s) | min (s) | robust / hand, median | robust / hand, min |")
print("|---|---:|---:|---:|---:|")
for robust, hand in PAIRS:
    mr, mh = statistics.median(times[robust]), statistics.median(times[hand])
    nr, nh = min(times[robust]), min(times[hand])
    print(f"| {robust} | {mr:.3f} | {nr:.3f} | {mr / mh:.3f} | {nr / nh:.3f} |")
    print(f"| {hand} | {mh:.3f} | {nh:.3f} | | |")
