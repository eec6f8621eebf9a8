//! `#[robust]` on blocking functions: free fns of every shape, driven by a virtual clock
//! installed for the default environment (no real sleeping).

use std::cell::{Cell, RefCell};
use std::fmt::Debug;
use std::io::{self, ErrorKind};
use std::time::Duration;

mod common;
use common::*;

use retry_runtime::robust;
use retry_runtime::time::VirtualTime;

thread_local! {
    static ATTEMPTS: Cell<u32> = const { Cell::new(0) };
    static LOG: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

fn attempt() -> u32 {
    ATTEMPTS.with(|a| {
        a.set(a.get() + 1);
        a.get()
    })
}

fn reset() -> VirtualTime {
    ATTEMPTS.with(|a| a.set(0));
    LOG.with(|l| l.borrow_mut().clear());
    VirtualTime::new()
}

fn log(s: String) {
    LOG.with(|l| l.borrow_mut().push(s));
}

fn logged() -> Vec<String> {
    LOG.with(|l| l.borrow().clone())
}

#[robust(retries = 5, backoff = exponential(base = 1, max = 60, m = 2), jitter = none)]
fn always_fails() -> io::Result<()> {
    attempt();
    Err(ErrorKind::Other.into())
}

#[test]
fn retries_and_delays_follow_the_attribute() {
    let time = reset();
    let _g = time.install();
    assert_eq!(always_fails().unwrap_err().kind(), ErrorKind::Other);
    assert_eq!(ATTEMPTS.with(Cell::get), 6);
    assert_eq!(
        time.sleeps(),
        [1, 2, 4, 8, 16].map(secs).to_vec(),
        "exponential(base = 1, max = 60, m = 2) without jitter"
    );
}

#[robust]
fn defaults() -> io::Result<()> {
    attempt();
    Err(ErrorKind::Other.into())
}

#[test]
fn defaults_are_three_retries_exponential_full_jitter() {
    let time = reset();
    let _g = time.install();
    assert!(defaults().is_err());
    assert_eq!(ATTEMPTS.with(Cell::get), 4);
    let sleeps = time.sleeps();
    for (x, d) in sleeps.iter().enumerate() {
        assert!(*d <= Duration::from_millis(100 << x), "retry {x}: {d:?}");
    }
}

#[robust(retries = 0)]
fn no_retry() -> io::Result<()> {
    attempt();
    Err(ErrorKind::Other.into())
}

#[robust(retries = -1, backoff = none)]
fn forever(until: u32) -> io::Result<u32> {
    let n = attempt();
    if n < until {
        Err(ErrorKind::Other.into())
    } else {
        Ok(n)
    }
}

#[test]
fn zero_and_negative_retries() {
    let time = reset();
    let _g = time.install();
    assert!(no_retry().is_err());
    assert_eq!(ATTEMPTS.with(Cell::get), 1);
    reset();
    assert_eq!(forever(500).unwrap(), 500);
}

#[robust(retries = -1, backoff = constant(base = "1s"), jitter = none, max_delay = "3.5s")]
fn budgeted() -> io::Result<()> {
    attempt();
    Err(ErrorKind::Other.into())
}

#[test]
fn max_delay_cuts_off_retries() {
    let time = reset();
    let _g = time.install();
    assert!(budgeted().is_err());
    // Retries start at 1 s, 2 s, 3 s; the next would start at 4 s > 3.5 s.
    assert_eq!(time.sleeps(), vec![secs(1); 3]);
    assert_eq!(ATTEMPTS.with(Cell::get), 4);
}

/// Generic, lifetime and where-clause function with an `impl Trait` argument and an owned
/// argument that is cloned for every attempt.
#[robust(retries = 2, backoff = none)]
pub fn generic<'a, T, U>(
    prefix: &'a str,
    items: Vec<T>,
    extra: impl AsRef<str> + Clone,
) -> Result<String, U>
where
    T: Debug + Clone,
    U: From<String>,
{
    let mut items = items; // owned and mutated: every attempt starts from a fresh clone
    items.truncate(1);
    let n = attempt();
    if n < 3 {
        return Err(U::from(format!("attempt {n} saw {} item(s)", items.len())));
    }
    Ok(format!("{prefix}{:?}{}", items, extra.as_ref()))
}

#[test]
fn generic_fn_with_cloned_arguments() {
    let time = reset();
    let _g = time.install();
    let r: Result<String, String> = generic("> ", vec![1, 2, 3], "!");
    assert_eq!(r.unwrap(), "> [1]!");
    assert_eq!(ATTEMPTS.with(Cell::get), 3);
}

#[derive(Clone, Debug, PartialEq)]
struct Counter(u32);

#[robust(retries = 3, backoff = none)]
fn mutates_owned(mut c: Counter) -> Result<u32, String> {
    c.0 += 1; // would reach 4 if the same value were reused
    let n = attempt();
    if n < 4 {
        Err(format!("{}", c.0))
    } else {
        Ok(c.0)
    }
}

#[test]
fn owned_arguments_are_cloned_per_attempt() {
    let time = reset();
    let _g = time.install();
    assert_eq!(mutates_owned(Counter(10)), Ok(11));
}

#[robust(retries = 3, backoff = none)]
fn pushes(out: &mut Vec<u32>) -> Result<usize, String> {
    let n = attempt();
    out.push(n);
    if n < 3 {
        Err("again".into())
    } else {
        Ok(out.len())
    }
}

#[test]
fn mutable_references_are_reused() {
    let time = reset();
    let _g = time.install();
    let mut v = Vec::new();
    assert_eq!(pushes(&mut v), Ok(3));
    assert_eq!(v, [1, 2, 3]);
}

// A unique borrow in an `Option` or a `Pin` cannot be cloned: each attempt reborrows it, so
// every attempt writes through the caller's reference (as for `&mut`).
#[robust(retries = 3, backoff = none)]
fn pushes_maybe(out: Option<&mut Vec<u32>>, mut extra: Option<&mut u32>) -> Result<usize, String> {
    let n = attempt();
    if let Some(e) = extra.as_deref_mut() {
        *e += 10;
    }
    // (The attempt's own binding is `mut` as written: reassigning it does not reach the next.)
    extra = None;
    let _ = extra;
    match out {
        Some(v) => {
            v.push(n);
            if n < 3 {
                Err("again".into())
            } else {
                Ok(v.len())
            }
        }
        None => Err("none".into()),
    }
}

#[robust(retries = 2, backoff = none)]
fn bumps_pinned(mut counter: std::pin::Pin<&mut u32>) -> Result<u32, String> {
    *counter += 1;
    counter.set(*counter + 1);
    if attempt() < 3 {
        Err("again".into())
    } else {
        Ok(*counter)
    }
}

#[test]
fn mutable_references_in_an_option_or_a_pin_are_reborrowed_per_attempt() {
    let time = reset();
    let _g = time.install();
    let (mut v, mut x) = (Vec::new(), 1);
    assert_eq!(pushes_maybe(Some(&mut v), Some(&mut x)), Ok(3));
    assert_eq!(v, [1, 2, 3]);
    assert_eq!(
        x, 31,
        "each of the three attempts added 10 through the same reference"
    );
    ATTEMPTS.with(|a| a.set(0));
    assert_eq!(pushes_maybe(None, None), Err("none".into()));
    assert_eq!(
        ATTEMPTS.with(|a| a.get()),
        4,
        "`None` is passed to every attempt"
    );
    ATTEMPTS.with(|a| a.set(0));
    let mut c = 0;
    assert_eq!(bumps_pinned(std::pin::Pin::new(&mut c)), Ok(6));
    assert_eq!(c, 6);
}

// A borrowed trait object passed on: each attempt's reborrow may shorten the object's lifetime
// to its own, as the parameter's type does without the attribute (a plain reborrow keeps the
// whole call's, and a fn taking `Option<&mut dyn Write>` would refuse it).
fn write_maybe(out: Option<&mut dyn std::fmt::Write>, n: u32) {
    if let Some(o) = out {
        let _ = write!(o, "{n}");
    }
}

fn write_to(out: &mut dyn std::fmt::Write, n: u32) {
    let _ = write!(out, "<{n}>");
}

trait Bump {
    fn bump(self: std::pin::Pin<&mut Self>) -> u32;
}

impl Bump for u32 {
    fn bump(mut self: std::pin::Pin<&mut Self>) -> u32 {
        *self += 1;
        *self
    }
}

fn bump(b: std::pin::Pin<&mut dyn Bump>) -> u32 {
    b.bump()
}

#[robust(retries = 2, backoff = none)]
fn passes_objects_on<'a>(
    out: Option<&'a mut (dyn std::fmt::Write + 'a)>,
    log: &mut (dyn std::fmt::Write + Send),
    counter: std::pin::Pin<&mut dyn Bump>,
) -> Result<u32, String> {
    let n = attempt();
    write_maybe(out, n);
    write_to(log, n);
    let c = bump(counter);
    if n < 3 { Err("again".into()) } else { Ok(c) }
}

// A pattern that binds the `Option` by reference reborrows it too (it cannot be cloned).
#[robust(retries = 2, backoff = none)]
fn pushes_through_a_pattern(ref mut out: Option<&mut Vec<u32>>) -> Result<usize, String> {
    let n = attempt();
    let Some(v) = out else {
        return Err("none".into());
    };
    v.push(n);
    if n < 3 {
        Err("again".into())
    } else {
        Ok(v.len())
    }
}

// An object with an `impl Trait` inside (which no `let` can name) keeps the plain reborrow.
#[robust(retries = 2, backoff = none)]
fn takes_from(
    it: &mut dyn Iterator<Item = impl Copy + Into<u32>>,
    more: Option<&mut dyn Iterator<Item = impl Copy + Into<u32>>>,
) -> Result<u32, String> {
    let n = attempt();
    let a = it.next().map_or(0, Into::into);
    let b = more.and_then(|m| m.next()).map_or(0, Into::into);
    if n < 3 {
        Err("again".into())
    } else {
        Ok(a + b)
    }
}

#[test]
fn borrowed_trait_objects_and_patterns_are_reborrowed_per_attempt() {
    let time = reset();
    let _g = time.install();
    let (mut out, mut log, mut counter) = (String::new(), String::new(), 0u32);
    let pinned: std::pin::Pin<&mut u32> = std::pin::Pin::new(&mut counter);
    let c = passes_objects_on(Some(&mut out), &mut log, pinned);
    assert_eq!(c, Ok(3));
    assert_eq!((out.as_str(), log.as_str()), ("123", "<1><2><3>"));
    assert_eq!(counter, 3, "each attempt bumped the caller's counter");
    ATTEMPTS.with(|a| a.set(0));
    let mut v = Vec::new();
    assert_eq!(pushes_through_a_pattern(Some(&mut v)), Ok(3));
    assert_eq!(v, [1, 2, 3]);
    ATTEMPTS.with(|a| a.set(0));
    let (mut it, mut more) = (1u8..10, 100u16..110);
    assert_eq!(
        takes_from(&mut it, Some(&mut more)),
        Ok(3 + 102),
        "the third attempt took the third item of each"
    );
}

// A body that includes a file may name any parameter there: each is rebound for every attempt
// (this one is moved, so it is cloned), as if the body named it.
#[robust(retries = 2, backoff = none)]
fn included_body(name: String) -> Result<usize, String> {
    include!("included/moves_name.rs")
}

#[test]
fn a_parameter_named_in_an_included_file_is_cloned_per_attempt() {
    let time = reset();
    let _g = time.install();
    assert_eq!(included_body("four".into()), Ok(4));
    assert_eq!(ATTEMPTS.with(|a| a.get()), 3);
}

// A blocking fn's timeout acts through the attempt's context, which only the included file
// reads here: the attribute cannot see that, so it does not call the timeout useless.
#[robust(timeout = "1s", retries = 0, attempt = ctx)]
fn included_reads_ctx(time: &VirtualTime) -> Result<bool, String> {
    include!("included/reads_ctx.rs")
}

#[test]
fn an_included_file_may_read_the_attempts_context() {
    let time = reset();
    let _g = time.install();
    assert_eq!(
        included_reads_ctx(&time),
        Ok(true),
        "two seconds passed a one-second timeout"
    );
    assert_eq!(ATTEMPTS.with(|a| a.get()), 1);
}

// A value computed from a `&mut` parameter before a `move` callback is made: it is read before
// the first attempt (the fn takes the general path, which makes its callbacks first), so the
// callback sees the vector as the caller passed it, not as the first attempt left it.
#[robust(retries = 2, backoff = none,
         on_error = { let n = out.len(); move |_e: &String, _| SEEN_LEN.with(|s| s.set(n)) })]
fn reads_len_first(out: &mut Vec<u32>) -> Result<usize, String> {
    out.push(attempt());
    if out.len() < 4 {
        Err("again".into())
    } else {
        Ok(out.len())
    }
}

thread_local! {
    static SEEN_LEN: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
}

#[test]
fn a_callback_may_be_given_a_value_read_from_a_mut_parameter_first() {
    let time = reset();
    let _g = time.install();
    let mut v = vec![7];
    assert_eq!(reads_len_first(&mut v), Ok(4));
    assert_eq!(v, [7, 1, 2, 3]);
    assert_eq!(SEEN_LEN.with(|s| s.get()), 1);
}

#[robust(retries = 3, backoff = none)]
fn pattern_args((a, b): (u32, u32), &c: &u32) -> Result<u32, String> {
    let n = attempt();
    if n < 2 {
        Err("once more".into())
    } else {
        Ok(a + b + c)
    }
}

#[test]
fn pattern_arguments() {
    let time = reset();
    let _g = time.install();
    assert_eq!(pattern_args((1, 2), &3), Ok(6));
}

fn parse_num(s: &str) -> Result<u32, io::Error> {
    s.parse::<u32>()
        .map_err(|e| io::Error::new(ErrorKind::InvalidData, e))
}

#[robust(retries = 4, backoff = none, on = [Io(InvalidData)])]
fn question_mark_ends_the_attempt(inputs: &[&str]) -> io::Result<u32> {
    let n = attempt() as usize;
    let v = parse_num(inputs[n - 1])?; // an Err here ends this attempt only
    log(format!("parsed {v}"));
    if v == 0 {
        return Err(ErrorKind::InvalidData.into()); // so does an early return
    }
    Ok(v)
}

#[test]
fn return_and_question_mark_end_only_the_attempt() {
    let time = reset();
    let _g = time.install();
    assert_eq!(
        question_mark_ends_the_attempt(&["x", "0", "y", "7"]).unwrap(),
        7
    );
    assert_eq!(ATTEMPTS.with(Cell::get), 4);
    assert_eq!(logged(), ["parsed 0", "parsed 7"]);
}

type AppResult<T> = Result<T, AppError>;

#[derive(Debug, PartialEq)]
enum AppError {
    Busy { retry_in: u32 },
    Locked,
    Fatal,
}

#[robust(retries = 5, backoff = none, on = [AppError::Busy { .. } | AppError::Locked])]
fn alias_and_patterns(script: &[AppError]) -> AppResult<&'static str> {
    let n = attempt() as usize;
    match script.get(n - 1) {
        Some(AppError::Busy { retry_in }) => Err(AppError::Busy {
            retry_in: *retry_in,
        }),
        Some(AppError::Locked) => Err(AppError::Locked),
        Some(AppError::Fatal) => Err(AppError::Fatal),
        None => Ok("done"),
    }
}

#[test]
fn user_alias_and_pattern_kinds() {
    let time = reset();
    let _g = time.install();
    let script = [AppError::Busy { retry_in: 1 }, AppError::Locked];
    assert_eq!(alias_and_patterns(&script), Ok("done"));
    reset();
    let script = [AppError::Locked, AppError::Fatal, AppError::Locked];
    assert_eq!(alias_and_patterns(&script), Err(AppError::Fatal));
    assert_eq!(ATTEMPTS.with(Cell::get), 2);
}

#[robust(retries = 5, backoff = none, on = [|e: &AppError| matches!(e, AppError::Busy { retry_in } if *retry_in < 5)])]
fn closure_kind(retry_in: u32) -> AppResult<()> {
    attempt();
    Err(AppError::Busy { retry_in })
}

#[test]
fn closure_kinds() {
    let time = reset();
    let _g = time.install();
    assert!(closure_kind(1).is_err());
    assert_eq!(ATTEMPTS.with(Cell::get), 6);
    reset();
    assert!(closure_kind(9).is_err());
    assert_eq!(ATTEMPTS.with(Cell::get), 1);
}

#[robust(
    retries = 2,
    backoff = none,
    on_success = || log("success".to_string()),
    on_error = |e: &io::Error, x| log(format!("error {x}: {}", e.kind())),
)]
fn with_callbacks(fail: u32) -> io::Result<u32> {
    let n = attempt();
    log(format!("attempt {n}"));
    if n <= fail {
        Err(ErrorKind::Interrupted.into())
    } else {
        Ok(n)
    }
}

#[test]
fn callbacks_order_and_arguments() {
    let time = reset();
    let _g = time.install();
    assert_eq!(with_callbacks(1).unwrap(), 2);
    assert_eq!(
        logged(),
        [
            "attempt 1",
            "error 0: operation interrupted",
            "attempt 2",
            "success"
        ]
    );
    reset();
    assert!(with_callbacks(10).is_err());
    assert_eq!(
        logged(),
        [
            "attempt 1",
            "error 0: operation interrupted",
            "attempt 2",
            "error 1: operation interrupted",
            "attempt 3",
            "error 2: operation interrupted"
        ]
    );
}

#[robust(timeout = "1s", retries = 2, backoff = constant(base = "2s"), jitter = none, on = [Timeout], attempt = ctx)]
fn cooperative(time: &VirtualTime, work: Duration) -> io::Result<(u32, Duration)> {
    log(format!(
        "retries {} timeout {:?} remaining {:?} elapsed {:?}",
        ctx.retries(),
        ctx.timeout(),
        ctx.remaining(),
        ctx.elapsed()
    ));
    time.advance(work);
    if attempt() < 3 {
        return Err(ErrorKind::Other.into()); // after the deadline: a timeout
    }
    Ok((ctx.number(), ctx.elapsed()))
}

#[test]
fn cooperative_timeout_and_attempt_context() {
    let time = reset();
    let _g = time.install();
    let (number, elapsed) = cooperative(&time, Duration::from_millis(1500)).unwrap();
    assert_eq!(number, 3);
    assert_eq!(elapsed, Duration::from_millis(1500 * 3 + 2000 * 2));
    assert_eq!(
        logged(),
        [
            "retries 0 timeout Some(1s) remaining Some(1s) elapsed 0ns",
            "retries 1 timeout Some(1s) remaining Some(1s) elapsed 3.5s",
            "retries 2 timeout Some(1s) remaining Some(1s) elapsed 7s"
        ]
    );
    // Errors before the deadline are not timeouts: not retried under `on = [Timeout]`.
    reset();
    assert!(cooperative(&time, Duration::from_millis(10)).is_err());
    assert_eq!(ATTEMPTS.with(Cell::get), 1);
}

#[robust(retries = 3, backoff = none, on = [Io(ConnectionRefused, ConnectionReset)])]
fn boxed(kind: ErrorKind) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    attempt();
    Err(Box::new(io::Error::from(kind)))
}

#[robust(retries = 3, backoff = none, on = [Io])]
fn anyhow_err(kind: ErrorKind) -> anyhow::Result<()> {
    attempt();
    Err(anyhow::Error::new(io::Error::from(kind)).context("while fetching"))
}

#[test]
fn io_kinds_look_inside_boxed_and_anyhow_errors() {
    let time = reset();
    let _g = time.install();
    assert!(boxed(ErrorKind::ConnectionReset).is_err());
    assert_eq!(ATTEMPTS.with(Cell::get), 4);
    reset();
    assert!(boxed(ErrorKind::NotFound).is_err());
    assert_eq!(ATTEMPTS.with(Cell::get), 1);
    reset();
    assert!(anyhow_err(ErrorKind::NotFound).is_err());
    assert_eq!(ATTEMPTS.with(Cell::get), 4);
}

#[derive(Debug)]
struct Wrapped(io::Error);
impl std::fmt::Display for Wrapped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "wrapped: {}", self.0)
    }
}
impl std::error::Error for Wrapped {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

#[robust(retries = 2, backoff = none, on = [Timeout])]
fn own_error_type() -> Result<(), Wrapped> {
    attempt();
    Err(Wrapped(ErrorKind::TimedOut.into()))
}

#[test]
fn timeout_kind_walks_the_source_chain_of_any_error_type() {
    let time = reset();
    let _g = time.install();
    assert!(own_error_type().is_err());
    assert_eq!(ATTEMPTS.with(Cell::get), 3);
}

#[robust(
    retries = 5,
    backoff = constant(base = "1s"),
    jitter = none,
    on = [Io],
    when(Io(ConnectionRefused), retries = 0),
    when(Io(TimedOut), retries = 2, backoff = constant(base = "10ms"), scale = 2),
)]
fn per_kind(script: &[ErrorKind]) -> io::Result<()> {
    let n = attempt() as usize;
    match script.get(n - 1) {
        Some(kind) => Err((*kind).into()),
        None => Ok(()),
    }
}

#[test]
fn per_kind_rules_share_one_retry_count() {
    let time = reset();
    let _g = time.install();
    // Refused: no retry at all.
    assert!(per_kind(&[ErrorKind::ConnectionRefused]).is_err());
    assert_eq!(ATTEMPTS.with(Cell::get), 1);
    // Timeouts: 2 retries of 10 ms * 2.
    reset();
    let time = VirtualTime::new();
    let _g = time.install();
    assert!(per_kind(&[ErrorKind::TimedOut; 5]).is_err());
    assert_eq!(time.sleeps(), vec![Duration::from_millis(20); 2]);
    // Other I/O errors: the top-level 5 retries of 1 s; a timeout after two of them finds the
    // shared count at 2, which its own limit of 2 does not allow.
    reset();
    let time = VirtualTime::new();
    let _g = time.install();
    let script = [
        ErrorKind::ConnectionReset,
        ErrorKind::BrokenPipe,
        ErrorKind::TimedOut,
    ];
    assert_eq!(per_kind(&script).unwrap_err().kind(), ErrorKind::TimedOut);
    assert_eq!(time.sleeps(), vec![secs(1); 2]);
}

/// A generic error type: kinds still find the `source()` chain through `E: Error`.
#[robust(retries = 2, backoff = none, on = [Io(NotFound)])]
fn generic_error<E>(make: fn() -> E) -> Result<(), E>
where
    E: std::error::Error + 'static,
{
    attempt();
    Err(make())
}

#[test]
fn generic_error_types() {
    let time = reset();
    let _g = time.install();
    assert!(generic_error(|| io::Error::from(ErrorKind::NotFound)).is_err());
    assert_eq!(ATTEMPTS.with(Cell::get), 3);
    reset();
    assert!(generic_error(|| Wrapped(ErrorKind::NotFound.into())).is_err());
    assert_eq!(ATTEMPTS.with(Cell::get), 3);
    reset();
    assert!(generic_error(|| io::Error::from(ErrorKind::Other)).is_err());
    assert_eq!(ATTEMPTS.with(Cell::get), 1);
}

/// Counts its drops; not `Clone`.
struct Token<'a>(&'a std::sync::atomic::AtomicU32);

impl Drop for Token<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

// (clippy's lints on a `_name` that is read: the attribute reads none of these.)
#[deny(clippy::used_underscore_binding, clippy::no_effect_underscore_binding)]
#[robust(retries = 2, backoff = none)]
fn unmentioned(
    _token: Token<'_>,
    _scratch: &mut Vec<u8>,
    calls: &std::sync::atomic::AtomicU32,
) -> io::Result<u32> {
    let n = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    if n < 2 {
        return Err(ErrorKind::Other.into());
    }
    Ok(n)
}

/// A parameter neither the body nor an expression of the attribute mentions (`_token`) is left
/// as it is: not cloned for each attempt (it needs no `Clone`), dropped once, when the fn
/// returns, as without the attribute.
#[test]
fn a_parameter_nothing_mentions_is_left_alone() {
    use std::sync::atomic::{AtomicU32, Ordering};
    let (drops, calls) = (AtomicU32::new(0), AtomicU32::new(0));
    assert_eq!(
        unmentioned(Token(&drops), &mut Vec::new(), &calls).unwrap(),
        2
    );
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[derive(Clone, Debug, PartialEq)]
struct Options {
    retries: u32,
    name: String,
}

// `opts` is read only after `..`: it is the variable (a struct update's base), not a field.
#[robust(retries = 2, backoff = none)]
fn with_defaults(opts: Options, calls: &std::sync::atomic::AtomicU32) -> io::Result<Options> {
    if calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
        return Err(ErrorKind::Other.into());
    }
    Ok(Options { retries: 3, ..opts })
}

/// A parameter read after `..` (a struct update's base, a range's end) is mentioned: each
/// attempt gets its clone. (It was taken for a field, left alone, and moved by the first
/// attempt: the fn did not compile.)
#[test]
fn a_parameter_read_after_two_dots_is_cloned_for_each_attempt() {
    let calls = std::sync::atomic::AtomicU32::new(0);
    let opts = Options {
        retries: 0,
        name: "db".into(),
    };
    let r = with_defaults(opts, &calls).unwrap();
    assert_eq!(
        r,
        Options {
            retries: 3,
            name: "db".into()
        }
    );
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 2);
}

// A `move` callback that names an owned parameter the body uses too gets a clone of it, in a
// blocking fn as in an async one: the two callbacks count into the same shared counter.
#[robust(retries = 3, backoff = none,
         on_error = move |e, _n| { log.borrow_mut().push(format!("{e}")); },
         on_success = move || { log.borrow_mut().push("done".to_owned()); })]
fn logged_by_move_callbacks(
    log: std::rc::Rc<RefCell<Vec<String>>>,
    failures: usize,
) -> io::Result<usize> {
    let len = log.borrow().len();
    if len < failures {
        Err(io::Error::other(format!("failure {len}")))
    } else {
        Ok(len)
    }
}

#[test]
fn move_callbacks_get_a_clone_of_the_parameters_they_name() {
    let log = std::rc::Rc::new(RefCell::new(Vec::new()));
    assert_eq!(
        logged_by_move_callbacks(std::rc::Rc::clone(&log), 2).unwrap(),
        2
    );
    assert_eq!(*log.borrow(), ["failure 0", "failure 1", "done"]);
    assert_eq!(std::rc::Rc::strong_count(&log), 1);
}
