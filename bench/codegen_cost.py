#!/usr/bin/env python3
"""What `#[robust]` costs the build: a generated crate of 100 fns (50 blocking, 50 async, each
called from `main`), once with the attribute and once without, against this workspace's
runtime. Reports, per annotated fn, the growth of the stripped release binary and of the debug
compile time of the crate itself (its dependencies are built first and not counted).

    python3 bench/codegen_cost.py [ROUNDS]

Not run in CI (it builds four binaries, a minute or two).
"""
import os
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
WORK = os.path.join(ROOT, "target", "codegen-cost")
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
N = 50  # of each kind

ATTRS = [
    "retries = 3",
    'retries = 5, backoff = exponential(base = "10ms", max = "1s"), on = [Io]',
    'timeout = "2s", retries = 2, on = [Timeout, Io]',
    'retries = 2, backoff = constant(base = "1ms"), jitter = none, when(Io(ConnectionRefused), retries = 0)',
]


def source(with_attr):
    lines = [
        "#![allow(clippy::all)]",
        "use std::hint::black_box;",
        "use std::io;",
        "use retry_runtime::robust;",
        "",
    ]
    for i in range(N):
        attr = ATTRS[i % len(ATTRS)]
        # A blocking fn's timeout is cooperative: fine, but keep the same attributes for both.
        if with_attr:
            lines.append(f"#[robust({attr})]")
        lines.append(
            f"fn sync_{i}(x: u64) -> io::Result<u64> {{\n"
            f"    let x = black_box(x);\n"
            f"    if x == u64::MAX - {i} {{ return Err(io::ErrorKind::ConnectionReset.into()); }}\n"
            f"    Ok(x.wrapping_mul({i * 2 + 3}).rotate_left({i % 63 + 1}))\n"
            f"}}\n"
        )
        if with_attr:
            lines.append(f"#[robust({attr})]")
        lines.append(
            f"async fn async_{i}(x: u64) -> io::Result<u64> {{\n"
            f"    let x = black_box(x);\n"
            f"    if x == u64::MAX - {i} {{ return Err(io::ErrorKind::ConnectionReset.into()); }}\n"
            f"    tokio::task::yield_now().await;\n"
            f"    Ok(x.wrapping_add({i * 7 + 1}))\n"
            f"}}\n"
        )
    calls_sync = " ".join(f"s = s.wrapping_add(sync_{i}(black_box({i})).unwrap_or(0));" for i in range(N))
    calls_async = " ".join(f"s = s.wrapping_add(async_{i}(black_box({i})).await.unwrap_or(0));" for i in range(N))
    lines.append(
        "fn main() {\n"
        "    let mut s = 0u64;\n"
        f"    {calls_sync}\n"
        "    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();\n"
        "    s = rt.block_on(async move {\n"
        "        let mut s = s;\n"
        f"        {calls_async}\n"
        "        s\n"
        "    });\n"
        "    println!(\"{s}\");\n"
        "}\n"
    )
    return "\n".join(lines)


def make(name, with_attr):
    d = os.path.join(WORK, name)
    os.makedirs(os.path.join(d, "src"), exist_ok=True)
    with open(os.path.join(d, "Cargo.toml"), "w") as f:
        f.write(
            f'[package]\nname = "{name}"\nversion = "0.0.0"\nedition = "2024"\npublish = false\n\n'
            '[workspace]\n\n[dependencies]\n'
            f'retry_runtime = {{ path = "{ROOT}/retry-runtime", package = "retry-runtime" }}\n'
            'tokio = { version = "1", default-features = false, features = ["rt", "time"] }\n\n'
            "[profile.release]\nstrip = true\n"
        )
    with open(os.path.join(d, "src", "main.rs"), "w") as f:
        f.write(source(with_attr))
    return d


def build(d, release):
    args = ["cargo", "build", "--quiet"] + (["--release"] if release else [])
    env = dict(os.environ, CARGO_TARGET_DIR=os.path.join(d, "target"))
    subprocess.run(args, cwd=d, env=env, check=True)


def timed_rebuild(d):
    """Debug build of the crate alone: its dependencies are already built."""
    os.utime(os.path.join(d, "src", "main.rs"))
    t = time.perf_counter()
    build(d, release=False)
    return time.perf_counter() - t


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    crates = {"with": make("with_robust", True), "without": make("without_robust", False)}
    sizes, times = {}, {k: [] for k in crates}
    for k, d in crates.items():
        build(d, release=True)
        sizes[k] = os.path.getsize(os.path.join(d, "target", "release", os.path.basename(d)))
        build(d, release=False)
    for _ in range(ROUNDS):
        for k, d in crates.items():
            times[k].append(timed_rebuild(d))
    fns = 2 * N
    growth = (sizes["with"] - sizes["without"]) / fns
    t_with, t_without = statistics.median(times["with"]), statistics.median(times["without"])
    print(f"{fns} annotated fns ({N} blocking, {N} async), {ROUNDS} debug rebuilds each")
    print(f"stripped release binary: {sizes['without']} -> {sizes['with']} bytes, "
          f"{growth:.0f} bytes per annotated fn")
    print(f"debug compile of the crate (median): {t_without:.2f} s -> {t_with:.2f} s, "
          f"{(t_with - t_without) / fns * 1000:.1f} ms per annotated fn")


if __name__ == "__main__":
    main()
