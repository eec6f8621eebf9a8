#!/usr/bin/env python3
"""Generates malformed `#[robust(...)]` attributes and checks that each one is a compile error.

Every case is one line: a valid context of two or three correct items around one mistake
(a misspelled key, a unit that does not exist, a sign, a bare name, a wrong type, an empty or
unbalanced group, a value that overflows, a kind that can never match, a `hedge` or adaptive
timeout mistake on an async fn, a timeout on an async fn that never awaits...), on a one-line
fn.
All cases go into one file compiled once, against the workspace's own crates. The check:

- no case makes the macro panic ("custom attribute panicked"), nor rustc crash;
- every case line carries at least one error (a case that compiles would be a configuration
  that silently does something else than what was written).

Run from the repository root (it is not part of CI: it compiles a few hundred functions):

    python3 bench/malformed_attributes.py [--count N] [--seed S]

It prints the number of cases, how many were rejected, and any that were not.
"""

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

VALID_ITEMS = [
    "retries = 3",
    "retries = -1",
    "max_delay = 10s",
    'max_delay = "1m 30s"',
    "timeout = 2",
    "timeout = 150ms",
    "backoff = exponential(base = 100ms, max = 20s)",
    "backoff = constant(base = 1)",
    "backoff = none",
    "jitter = full",
    "jitter = none",
    "scale = 0.5",
    "on = [Io, Timeout]",
    "when(Io(ConnectionRefused), retries = 0)",
]

KEYS = ["timeout", "deadline", "retries", "max_delay", "backoff", "jitter", "scale", "on", "when",
        "on_success", "on_error", "on_retry", "hint", "fallback", "budget", "breaker", "throttle",
        "limit", "attempt", "crate"]


def misspell(rng, word):
    """A near miss of `word` that is not a key."""
    while True:
        w = list(word)
        op = rng.randrange(4)
        i = rng.randrange(len(w))
        if op == 0 and len(w) > 2:
            del w[i]
        elif op == 1:
            w.insert(i, rng.choice("aeiorstz"))
        elif op == 2 and i + 1 < len(w):
            w[i], w[i + 1] = w[i + 1], w[i]
        else:
            w[i] = rng.choice("aeiouxyz")
        out = "".join(w)
        if out not in KEYS and out.isidentifier():
            return out


def mistakes(rng):
    """One malformed item, and what it tries."""
    bad_durations = [
        "0", "-0", "2min", "2sec", "100msec", "1d", "3f32", "--1", "1e400", '"2 parsecs"',
        '""', '"-1e400"', '"18446744073709551615s 1000000000ns"', "18446744073709551615h",
        '"99999999999999999999999999999y"', "[1, 2]", "none()", "soon", "1.5.2", "'c'",
        "true", "x", '"1m 30"',
    ]
    strategy_mistakes = [
        "exponentail(base = 1, max = 2)", "exponential", "exponential()",
        "exponential(base = 1)", "exponential(max = 1)", "exponential(base = 3, max = 1)",
        "exponential(base = 1, max = 2, m = 0.5)", "exponential(base = 1, max = 2, m = 2f64)",
        "exponential(base = 1, max = 2, m = 1e999)", "exponential(base = 1, max = 2, mm = 2)",
        "exponential(base = 1, base = 1, max = 2)", "exponential(base = -1, max = 2)",
        "exponential(base = 1min, max = 2)", "exponential(base = 1, max = 2,, m = 2)",
        "linear(base = 1, max = 2, interval = -1)", "linear(base = 1, max = 2, interval = 1x)",
        "polynomial(base = 1, max = 2, p = 1)", "polynomial(base = 1, max = 2, p = [])",
        "polynomial(base = 1, max = 2, p = [2, 0.5])", "polynomial(base = 1, max = 2, p = [2u8])",
        "fibonacci(base = 1, max = 2, unit = 0x)", "random(base = 2, max = 1)",
        "constant(base = 1, max = 2)", "constant()", "none(1)", "custom()", "custom",
        "custom(1, 2)", "quadratic(base = 1, max = 2)", '"exponential"', "1",
    ]
    jitter_mistakes = ["ful", "Full", "full()", "partial", "custom()", "custom", '"full"', "1",
                       "decorelated", "aws", "equal(1)"]
    kind_mistakes = [
        "[timeout]", "[Tiemout]", "[io]", "[IO]", "[ServerBusy]", "[ref e]", "[mut e]", "[e]",
        "[Io()]", "[Io(ConnectionRefsed)]", "[Io(ConnectionRefused, ConnectionRefused)]",
        "[Io(1)]", "[]", "[Io, Io]", "Io", "[Timeout,, Io]", "[|e| ]", "[Io(]",
        # `Ok(..)` kinds over the fn's `()` value.
        "[Ok()]", "[Ok]", "[Ok(v)]", "[Ok(x)]", "[Ok(Timeout)]", "[Ok(1, 2)]",
        "[Ok(|v: &String| v.is_empty())]", '[Ok("busy")]', "[Ok(|v: &()| 1)]",
        "[Ok(()), Ok(())]", "[Ok(ref v)]", "[Ok(Tiemout)]",
    ]
    when_mistakes = [
        "when(Timeout)", "when()", "when(, retries = 1)", "when(Timeout, timeout = 1)",
        "when(Timeout, retriez = 1)", "when(Timeout, on_retry = |_, _| ())",
        "when(io, retries = 0)", "when(Io(), retries = 1)", "when(Timeout retries = 1)",
        "when(Timeout, retries = 1, retries = 2)", "when(Timeout, scale = 0)",
        "when(Timeout, deadline = 1s)",
        "when(Timeout, backoff = none()), when(Timeout, retries = 1)",
        "when(Ok(()), hint = 1)", "when(Io, retries = 1, hint = |_e| None)",
        "when(Ok(()), fallback = |e| Err(e))", "when(Ok(|v: &u8| true), retries = 1)",
        "when(Ok(()), retries = 1, hint = |v: &String| None)",
    ]
    other_mistakes = [
        "retries = 1.5", "retries = 3f32", "retries = --3", "retries = 4294967296",
        "retries = \"3\"", "retries = three", "retries", "retries =", "retries = 1 2",
        "scale = 0", "scale = -1", "scale = 1e309", "scale = 2u8", "scale = none",
        "on_success = ", "budget = ", "breaker = ", "attempt = 1", "attempt = \"ctx\"",
        "attempt = x", "crate = retry_runtime", "crate = \"not a path\"", "= 3", "3",
        "retries = 3 retries = 4", "(retries = 3)", "retries == 3",
        "on_error = |e: &String, n: u32| ()", "on_retry = |e| ()", "hint = 1",
        "on_success = |x: u32| ()",
        "fallback = 1", "fallback = |e: &String| Err(e.clone())", "fallback = |e: u32| Ok(())",
        "fallback = |_e| async { Ok(()) }", "fallback =", "fallback = |_e| Ok(1u8)",
        "on_retry = |e: &String, i: &retry_runtime::RetryInfo| ()",
        "limit = 8", "limit = LIMIT", "limit =", "throttle = 2.0", "throttle = THROTTLE",
        "limit = retry_runtime::ConcurrencyLimit::new(1, 1)", "throttle = ()",
        "when(Timeout, limit = 1)", "when(Io, throttle = 1)",
    ]
    choice = rng.randrange(10)
    if choice == 0:
        key = rng.choice(["timeout", "deadline", "max_delay"])
        value = rng.choice(bad_durations)
        if key == "max_delay" and value in ("0", "-0"):
            value = "-0.0ms" if value == "-0" else "0x"  # zero is valid there: "never retry"
            if value == "-0.0ms":
                key = rng.choice(["timeout", "deadline"])
        return f"{key} = {value}"
    if choice == 1:
        return f"backoff = {rng.choice(strategy_mistakes)}"
    if choice == 2:
        return f"jitter = {rng.choice(jitter_mistakes)}"
    if choice == 3:
        return f"on = {rng.choice(kind_mistakes)}"
    if choice == 4:
        return rng.choice(when_mistakes)
    if choice == 5:
        key = misspell(rng, rng.choice(KEYS))
        return f"{key} = 1"
    if choice == 6:
        return rng.choice(other_mistakes)
    if choice == 8:
        # Async-only keys, on an async fn (see `case`).
        return rng.choice(ASYNC_MISTAKES)
    if choice == 9:
        # A timeout or deadline on an async fn whose body never awaits (see `case`).
        return rng.choice(NEVER_AWAITED)
    # A duplicate of a valid item.
    item = rng.choice(VALID_ITEMS[:12])
    return f"{item}, {item}"


# Settings that cannot act on an async fn whose body never awaits.
NEVER_AWAITED = ["timeout = 150ms", "timeout = 1, retries = 2",
                 "timeout = adaptive(p = 99, min = 1ms, max = 1s)"]

# Mistakes in the keys only an async fn takes (`hedge`, an adaptive timeout).
ASYNC_MISTAKES = [
    "hedge(after = 0, max = 1)", "hedge(after = 50ms, max = 0)", "hedge()", "hedge",
    "hedge = 50ms", "hedge(max = 1)", "hedge(after = 50ms, max = -1)", "hedge(after = -50ms)",
    "hedge(after = p100)", "hedge(after = p0)", "hedge(after = p101)", "hedge(after = p)",
    "hedge(after = 95p)", "hedge(after = P95)", "hedge(after = 50ms, max = 1.5)",
    "hedge(aftr = 50ms)", "hedge(after = 50ms, after = 60ms)",
    "hedge(after = 50ms, max = 4294967296)", "hedge(after = 50mins)", "hedge(after = p95.5.5)",
    "hedge(after = 50ms, mx = 1)", "hedge(50ms)", 'hedge(after = "p95")', "hedge(after = p9)",
    "hedge(after = 50ms, max = 1), hedge(after = 60ms, max = 1)", "when(Io, hedge(after = 1s))",
    "timeout = adaptive()", "timeout = adaptive(p = 99)",
    "timeout = adaptive(p = 101, min = 1ms, max = 1s)",
    "timeout = adaptive(p = 0, min = 1ms, max = 1s)",
    "timeout = adaptive(p = 99, factor = 0, min = 1ms, max = 1s)",
    "timeout = adaptive(p = 99, factor = -1, min = 1ms, max = 1s)",
    "timeout = adaptive(p = 99, min = 2s, max = 1s)",
    "timeout = adaptive(p = p99, min = 1ms, max = 1s)",
    "timeout = adaptive(p = 99, min = 1ms, max = 1s, max = 2s)",
    "timeout = adaptve(p = 99, min = 1ms, max = 1s)",
    "timeout = adaptive(p = 99, fator = 2, min = 1ms, max = 1s)",
    "timeout = adaptive(p = 99, factor = 1e999, min = 1ms, max = 1s)",
    "deadline = adaptive(p = 99, min = 1ms, max = 1s)",
    "timeout = adaptive(p = 99, min = 1msec, max = 1s)",
    "timeout = adaptive(p = 99, min = 1ms, max = 1s, factor = 2f32)",
    "when(Timeout, timeout = adaptive(p = 99, min = 1ms, max = 1s))",
]


# Each fn takes `x: &str` (so `attempt = x` shadows a parameter, and `on = [e]`-style names
# have something to collide with) and returns an error type with no `std::error::Error`
# view half of the time (so `Io` can never match).
FN_SHAPES = [
    ("fn f{i}(x: &str) -> std::io::Result<()> {{ let _ = x; Ok(()) }}", True),
    ("fn f{i}(x: &str) -> Result<(), String> {{ let _ = x; Ok(()) }}", False),
]
# The same as async fns that await (a timeout acts on them), and one that never awaits.
ASYNC_SHAPES = [
    ("async fn f{i}(x: &str) -> std::io::Result<()> {{ let _ = x; std::future::ready(()).await; "
     "Ok(()) }}", True),
    ("async fn f{i}(x: &str) -> Result<(), String> {{ let _ = x; std::future::ready(()).await; "
     "Ok(()) }}", False),
]
NEVER_AWAITS = ("async fn f{i}(x: &str) -> std::io::Result<()> {{ let _ = x; Ok(()) }}", True)


def case(rng, i):
    bad = mistakes(rng)
    others = rng.sample(VALID_ITEMS, rng.randrange(0, 3))
    items = others + [bad]
    rng.shuffle(items)
    if bad in ASYNC_MISTAKES:
        shape, io = rng.choice(ASYNC_SHAPES)
        # (No other timeout beside an adaptive one.)
        if "adaptive" in bad:
            items = [it for it in items if it == bad or not it.startswith("timeout")]
    elif bad in NEVER_AWAITED:
        shape, io = NEVER_AWAITS
        # (A rule on `Timeout` makes such a timeout act, cooperatively: an error returned
        # after it is one.)
        items = [it for it in items
                 if it == bad or not (it.startswith("timeout") or "Timeout" in it)]
    else:
        shape, io = rng.choice(FN_SHAPES)
    if "&String" in bad:
        # A callback over `&String` is right for a `String` error: a mistake only elsewhere.
        shape, io = FN_SHAPES[0]
    if not io:
        # Keep the valid items valid for a `String` error: no `Io`/`Timeout` kinds there.
        items = [it for it in items if it == bad or ("Io" not in it and "Timeout" not in it)]
    return f"#[robust({', '.join(items)})] " + shape.format(i=i), bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=400)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--keep", action="store_true", help="keep the generated crate")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))

    # Case i is on line i + 4 of the generated file.
    cases = {}
    for i in range(args.count):
        cases[i + 4] = case(rng, i)

    # rustc reports name-resolution and type errors only when macro expansion had none, so a
    # case whose mistake only the compiler finds is hidden by the others in the same file:
    # the cases with no error on their line are compiled again, alone together, until the
    # set no longer shrinks.
    remaining = dict(cases)
    panics = []
    crashed = False
    rounds = 0
    while remaining and rounds < 4:
        rounds += 1
        errors_on, round_panics, round_crash = compile_cases(root, remaining, args.keep)
        panics += round_panics
        crashed |= round_crash
        still = {n: c for n, c in remaining.items() if n not in errors_on}
        if len(still) == len(remaining):
            break
        remaining = still
    accepted = sorted(remaining.items())
    print(f"cases: {len(cases)} (seed {args.seed}), compiled in {rounds} rounds")
    print(f"rejected with an error on their line: {len(cases) - len(accepted)}")
    print(f"macro panics: {len(panics)}; compiler crash: {'yes' if crashed else 'no'}")
    for n, (text, bad) in accepted:
        print(f"  ACCEPTED line {n}: {bad!r}\n    {text}")
    for n, text in panics:
        print(f"  PANIC line {n}: {text}")
    return 1 if accepted or panics or crashed else 0


def compile_cases(root, cases, keep):
    """Compiles the cases (kept on their line numbers); returns the lines with an error, the
    macro panics and whether the compiler crashed."""
    last = max(cases)
    lines = ["#![allow(unused)]", "use retry_runtime::robust;"] + [""] * (last - 2)
    for n, (text, _) in cases.items():
        lines[n - 1] = text
    lines.append("fn main() {}")
    tmp = tempfile.mkdtemp(prefix="robust-malformed-")
    try:
        os.makedirs(os.path.join(tmp, "src"))
        with open(os.path.join(tmp, "Cargo.toml"), "w") as f:
            f.write(
                "[package]\nname = \"malformed\"\nversion = \"0.0.0\"\nedition = \"2024\"\n"
                "publish = false\n\n[workspace]\n\n[dependencies]\n"
                f"retry_runtime = {{ path = \"{root}/retry-runtime\", package = \"retry-runtime\" }}\n"
            )
        with open(os.path.join(tmp, "src", "main.rs"), "w") as f:
            f.write("\n".join(lines) + "\n")
        env = dict(os.environ)
        env.setdefault("CARGO_TARGET_DIR", os.path.join(root, "target", "malformed"))
        out = subprocess.run(
            ["cargo", "check", "--quiet", "--message-format=json"],
            cwd=tmp, env=env, capture_output=True, text=True,
        )
        errors_on = {}
        panics = []
        for line in out.stdout.splitlines():
            try:
                msg = json.loads(line)
            except json.JSONDecodeError:
                continue
            if msg.get("reason") != "compiler-message":
                continue
            m = msg["message"]
            if m.get("level") not in ("error", "error: internal compiler error"):
                continue
            text = m.get("message", "")
            for span in m.get("spans", []):
                if span.get("is_primary") and span["file_name"].endswith("main.rs"):
                    errors_on.setdefault(span["line_start"], []).append(text)
                    if "panicked" in text:
                        panics.append((span["line_start"], text))
        crashed = "overflowed its stack" in out.stderr or "internal compiler error" in out.stderr
        if crashed:
            print(out.stderr[-3000:])
        if keep:
            print(f"generated crate kept in {tmp}")
        return errors_on, panics, crashed
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)

if __name__ == "__main__":
    sys.exit(main())
