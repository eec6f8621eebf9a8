//! [`PolicyBuilder`]: every setting of a [`Policy`], validated.

// The builder changes one type parameter per call; spelling those types out is the design.
#![allow(clippy::type_complexity)]

use std::time::Duration;

use super::{Extras, Policy};
use crate::backoff::{Backoff, Exponential};
use crate::callbacks::Noop;
use crate::guard::{AsBreaker, AsBudget};
#[cfg(doc)]
use crate::guard::{CircuitBreaker, RetryBudget};
use crate::hedge::{Hedge, Hedged};
use crate::jitter::{FullJitter, Jitter};
use crate::kind::AnyError;
use crate::policy::rules::{OkRule, Rule};
use crate::policy::settings::{Retries, RuleSettings, Settings, Written};
use crate::time::{DefaultEnv, Seeded};
use crate::timeout::{Adaptive, NoTimeout, PerAttempt, SetTimeout, WithDeadline};
use crate::{ConfigError, limit_from_secs};

/// `$builder` with one part of its policy replaced by `$f(old part)`: the struct literal of
/// an update that changes the part's type (which `..base` cannot do), written once. Each arm
/// names the parts kept.
macro_rules! map_part {
    ($b:expr, whens, $f:expr) => {
        map_part!(@ $b, whens, $f, [on, settings, timeout, on_success, on_error, env, extras])
    };
    ($b:expr, on, $f:expr) => {
        map_part!(@ $b, on, $f, [whens, settings, timeout, on_success, on_error, env, extras])
    };
    ($b:expr, settings, $f:expr) => {
        map_part!(@ $b, settings, $f, [whens, on, timeout, on_success, on_error, env, extras])
    };
    ($b:expr, timeout, $f:expr) => {
        map_part!(@ $b, timeout, $f, [whens, on, settings, on_success, on_error, env, extras])
    };
    ($b:expr, on_success, $f:expr) => {
        map_part!(@ $b, on_success, $f, [whens, on, settings, timeout, on_error, env, extras])
    };
    ($b:expr, on_error, $f:expr) => {
        map_part!(@ $b, on_error, $f, [whens, on, settings, timeout, on_success, env, extras])
    };
    ($b:expr, env, $f:expr) => {
        map_part!(@ $b, env, $f, [whens, on, settings, timeout, on_success, on_error, extras])
    };
    ($b:expr, extras, $f:expr) => {
        map_part!(@ $b, extras, $f, [whens, on, settings, timeout, on_success, on_error, env])
    };
    (@ $b:expr, $part:ident, $f:expr, [$($kept:ident),*]) => {{
        let PolicyBuilder { policy, error, seed, checks } = $b;
        PolicyBuilder {
            policy: Policy {
                $part: ($f)(policy.$part),
                $($kept: policy.$kept,)*
            },
            error,
            seed,
            checks,
        }
    }};
}

impl Policy {
    /// A builder with the SPEC defaults: 3 retries, no timeout, no `max_delay`,
    /// `exponential(base = 100 ms, max = 20 s, m = 2)`, full jitter, scale 1, every error
    /// retried, no callbacks, real time.
    pub const fn builder() -> PolicyBuilder {
        PolicyBuilder {
            policy: Policy {
                whens: (),
                on: AnyError,
                settings: Settings::new(),
                timeout: NoTimeout,
                on_success: Noop,
                on_error: Noop,
                env: DefaultEnv,
                extras: Extras::NONE,
            },
            error: None,
            seed: None,
            checks: Checks::NONE,
        }
    }
}

/// Builds a [`Policy`], validating every value; [`build`](Self::build) reports the first
/// invalid one as a [`ConfigError`].
///
/// ```
/// use std::io::ErrorKind::ConnectionRefused;
/// use std::time::Duration;
/// use retry_runtime::kind::{ClassifyExt, Io, Timeout};
/// use retry_runtime::{Constant, Exponential, FullJitter, NoJitter, Policy};
///
/// let policy = Policy::builder()
///     .timeout(Duration::from_secs(2))
///     .backoff(Exponential::new(Duration::from_secs(1), Duration::from_secs(60), 2.0)?)
///     .jitter(FullJitter)
///     .retries(5)
///     .on(Timeout.or(Io::ANY))
///     .when(Io::of([ConnectionRefused]), |s| s.retries(0))
///     .when(Timeout, |s| s.retries(10).backoff(Constant::new(Duration::from_millis(200))).jitter(NoJitter))
///     .on_error(|e: &std::io::Error, retries| eprintln!("retry {retries}: {e}"))
///     .build()?;
/// # let _ = policy;
/// # Ok::<(), retry_runtime::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct PolicyBuilder<
    W = (),
    K = AnyError,
    B = Exponential,
    J = FullJitter,
    T = NoTimeout,
    S = Noop,
    F = Noop,
    C = DefaultEnv,
    X = Extras,
> {
    policy: Policy<W, K, Settings<B, J>, T, S, F, C, X>,
    error: Option<ConfigError>,
    seed: Option<u64>,
    /// What `build` checks against the deadline of the rules added so far.
    checks: Checks,
}

/// Whether a rule's shortest delay is not below its `max_delay` (a `max_delay` of zero, which
/// says "never retry" plainly, is not counted).
fn past(shortest: Option<Duration>, max_delay: Option<Duration>) -> bool {
    matches!((shortest, max_delay), (Some(d), Some(m)) if !m.is_zero() && d >= m)
}

/// What [`PolicyBuilder::build`] checks against the deadline, gathered as the rules are added.
#[derive(Debug, Clone, Copy)]
struct Checks {
    /// The longest `max_delay` of a `when` rule.
    rule_max_delay: Option<Duration>,
    /// The longest of the `when` (error) rules' shortest delays, of those that retry and whose
    /// jitter knows its shortest delay ([`Jitter::shortest`]).
    rule_shortest: Option<Duration>,
    /// Whether a `when` (error) rule's shortest delay is not below its own `max_delay`.
    rule_past_max_delay: bool,
    /// Whether a [`hint`](PolicyBuilder::hint) may choose an error's delay instead.
    hinted: bool,
    /// The longest of the `when_ok` rules' shortest delays, of those whose kind asks for no
    /// delay of its own (an [`OkIf`](crate::kind::OkIf) without a hint) and that retry.
    value_shortest: Option<Duration>,
    /// Whether such a `when_ok` rule's shortest delay is not below its own `max_delay`.
    value_past_max_delay: bool,
    /// Whether the `on` kind is [`NoError`](crate::kind::NoError): the `on` rule then takes
    /// no error, and is checked only for the values of an `on_ok` kind (`on_plain_values`).
    on_never: bool,
    /// Whether `on` was called (the default kind, every error, is not checked against the
    /// `when` rules).
    on_written: bool,
    /// Whether the `on_ok` kind is an [`OkIf`](crate::kind::OkIf) without a hint: its values
    /// wait the `on` rule's backoff.
    on_plain_values: bool,
    /// Whether a `when` or `when_ok` rule may retry (not `retries(0)` nor `max_delay` zero).
    whens_retry: bool,
    /// Whether a `when` rule (on errors) may retry.
    error_whens_retry: bool,
    /// Whether an `on_ok` kind is set: the `on` rule then takes values too.
    on_values: bool,
    /// The kinds of the `when` rules so far that later rules cannot get past, as far as
    /// their types tell: [`AnyError`](crate::kind::AnyError) (every error),
    /// [`Io::ANY`](crate::kind::Io::ANY) (every I/O error), [`Timeout`](crate::kind::Timeout).
    every_error: bool,
    every_io: bool,
    timeout: bool,
    /// Whether an `on_retry` callback is set.
    on_retry: bool,
    /// Whether a `when` rule with a strategy that waits reads the `on` rule's jitter, or its
    /// scale (it set none of its own).
    top_jitter_read: bool,
    /// Whether such a `when` rule reads the `on` rule's jitter with a strategy of its own (one
    /// that inherits the `on` rule's strategy too reads the pair as the `on` rule does).
    top_jitter_read_elsewhere: bool,
    /// Whether a `when` rule that may retry reads the `on` rule's strategy with a jitter of
    /// its own (the strategy's growth then counts, whatever the `on` rule's jitter reads).
    top_backoff_read_elsewhere: bool,
    top_scale_read: bool,
    /// Whether a `when` or `when_ok` rule reads the `on` rule's retries (it set none of its
    /// own), its strategy or its `max_delay` (it set none, and may retry).
    inherit_retries: bool,
    inherit_backoff: bool,
    inherit_max_delay: bool,
    /// Whether a `when` or `when_ok` rule that may retry reads the `on` rule's retries.
    retrying_inherit_retries: bool,
    /// How many `when` and `when_ok` rules may retry (saturating).
    retrying_whens: u32,
    /// Why the jitter a `when` or `when_ok` rule that may retry wrote would change nothing, were
    /// it the policy's one rule that retries (the last such rule's: read only when it is).
    jitter_if_alone: Option<&'static str>,
    /// Whether the concurrency limit has one slot (a hedge could never run beside the attempt
    /// that holds it).
    limit_of_one: bool,
    /// Whether a `when` or `when_ok` rule that may retry reads the backoff exponent the
    /// decorrelated jitter resets: with a strategy of its own whose delay depends on it, or a
    /// jitter of the user's (its `JitterState::exponent` is public).
    when_reads_exponent: bool,
}

impl Checks {
    const NONE: Self = Checks {
        rule_max_delay: None,
        rule_shortest: None,
        rule_past_max_delay: false,
        hinted: false,
        value_shortest: None,
        value_past_max_delay: false,
        on_never: false,
        on_written: false,
        error_whens_retry: false,
        on_plain_values: false,
        whens_retry: false,
        on_values: false,
        every_error: false,
        every_io: false,
        timeout: false,
        on_retry: false,
        top_jitter_read: false,
        top_jitter_read_elsewhere: false,
        top_backoff_read_elsewhere: false,
        top_scale_read: false,
        inherit_retries: false,
        inherit_backoff: false,
        inherit_max_delay: false,
        retrying_inherit_retries: false,
        retrying_whens: 0,
        jitter_if_alone: None,
        limit_of_one: false,
        when_reads_exponent: false,
    };

    /// Why a `when` rule of kind `K` would never apply, as far as the kinds' types tell: a
    /// rule added before it takes every error it would first (rules are tried in the order
    /// added), or `K` matches no error.
    ///
    /// A kind made with [`or`](crate::kind::ClassifyExt::or) is checked part by part: one of
    /// its parts that never applies is refused too (it would read as retried by this rule).
    fn never_applies<K: ?Sized>(&self) -> Option<&'static str> {
        let parts = kind_parts(std::any::type_name::<K>());
        let several = parts.len() > 1;
        // (`NoError` beside other kinds says what it does, "add nothing", as generic code may
        // write it; alone, the rule never applies.)
        let only_no_error = parts.iter().all(|p| *p == Part::NoError);
        parts.into_iter().find_map(|part| {
            let why = match part {
                Part::NoError if several && !only_no_error => return None,
                Part::NoError => (
                    "never applies: `NoError` matches no error; leave it out",
                    "has a kind that never applies: `NoError` matches no error; leave it out",
                ),
                _ if self.every_error => (
                    "never applies: an earlier `when(AnyError, ..)` takes every error first (rules are tried in the order added); add this one first, or leave it out",
                    "has a kind that never applies: an earlier `when(AnyError, ..)` takes every error first (rules are tried in the order added); add this one first, or leave that kind out",
                ),
                Part::IoAny | Part::Io if self.every_io => (
                    "never applies: an earlier `when(Io::ANY, ..)` takes every I/O error first (rules are tried in the order added); add this one first, or leave it out",
                    "has a kind that never applies: an earlier `when(Io::ANY, ..)` takes every I/O error first (rules are tried in the order added); add this one first, or leave that kind out",
                ),
                Part::Timeout if self.timeout => (
                    "never applies: an earlier `when(Timeout, ..)` takes every timeout first; merge the two",
                    "has a kind that never applies: an earlier `when(Timeout, ..)` takes every timeout first; merge the two",
                ),
                _ => return None,
            };
            Some(if several { why.1 } else { why.0 })
        })
    }

    /// Why a kind of the `on` rule (written with [`on`](PolicyBuilder::on)) never applies: the
    /// `when` rules are tried before it, and one takes every error, or every I/O error, first.
    /// (A kind that is a `when`'s own, `on(Timeout)` beside `when(Timeout, ..)`, is allowed:
    /// the `when` gives its settings.)
    fn on_never_applies<K: ?Sized>(&self) -> Option<&'static str> {
        if !self.on_written {
            return None;
        }
        kind_parts(std::any::type_name::<K>())
            .into_iter()
            .find_map(|part| match part {
                Part::NoError | Part::Any => None,
                _ if self.every_error => Some(
                    "never applies: the `when` rules are tried before `on`, and a `when(AnyError, ..)` takes every error first; leave this kind out of `on`, or narrow that `when`",
                ),
                Part::Io if self.every_io => Some(
                    "never applies: the `when` rules are tried before `on`, and a `when(Io::ANY, ..)` takes every I/O error first; leave this kind out of `on`, or narrow that `when`",
                ),
                _ => None,
            })
    }

    /// Notes the settings of a `when` or `when_ok` rule: whether it may retry, and whether it
    /// reads the `on` rule's jitter and scale. The error for a setting it has no use for.
    fn add_rule<B2: Backoff, J2>(&mut self, settings: &Settings<B2, J2>) -> Option<ConfigError> {
        let (jitter, scale) = reads_top::<B2, J2>(settings);
        let retries = may_retry(&settings.rule);
        self.inherit_retries |= !settings.written.retries;
        self.inherit_backoff |= retries && !settings.written.backoff;
        self.inherit_max_delay |= retries && !settings.written.max_delay;
        self.retrying_inherit_retries |= retries && !settings.written.retries;
        self.retrying_whens = self.retrying_whens.saturating_add(u32::from(retries));
        if retries {
            self.jitter_if_alone = settings
                .written
                .jitter
                .then(|| {
                    dead_jitter::<B2, J2>(
                        &settings.rule.backoff,
                        true,
                        false,
                        settings.written.backoff,
                    )
                })
                .flatten();
        }
        self.whens_retry |= retries;
        self.when_reads_exponent |= retries
            && (settings.written.backoff && !flat(&settings.rule.backoff)
                || settings.written.jitter && !crate_jitter::<J2>());
        self.top_jitter_read |= jitter;
        self.top_jitter_read_elsewhere |= jitter && settings.written.backoff;
        self.top_backoff_read_elsewhere |=
            retries && !settings.written.backoff && settings.written.jitter;
        self.top_scale_read |= scale;
        unread_setting::<B2, J2>(settings)
    }

    /// Notes a `when` rule of kind `K` (see [`never_applies`](Self::never_applies)).
    fn add_when<K: ?Sized>(&mut self) {
        for part in kind_parts(std::any::type_name::<K>()) {
            self.every_error |= matches!(part, Part::Any);
            self.every_io |= matches!(part, Part::IoAny);
            self.timeout |= matches!(part, Part::Timeout);
        }
    }
}

/// Why the jitter `J`, written for a rule whose strategy is `backoff`, changes nothing or makes
/// every delay 0 (as the attribute refuses it): the AWS decorrelated jitter beside `NoBackoff`
/// (its `max` of 0 caps every draw), beside a strategy whose `base` is 0 in a policy of one
/// rule (every delay 0; with other rules, the previous delay it starts from may be another
/// rule's), beside a strategy whose `base` is its `max` (`Constant`: it draws between the
/// two), or beside a growing strategy of the rule's own (`own_strategy`: one a `when` rule
/// inherits grows for the rules that read it otherwise), the decorrelated jitter beside a
/// strategy whose delay does not depend on the exponent it moves (`NoBackoff`, `Constant`,
/// `Random`, or a `base` no lower than `max`) in a policy of one rule, or of rules that all
/// wait such delays (`all_flat`: in a policy where another rule's delay grows, it moves the
/// exponent that rule reads too).
fn dead_jitter<B: Backoff, J>(
    backoff: &B,
    single: bool,
    all_flat: bool,
    own_strategy: bool,
) -> Option<&'static str> {
    let none = same_type::<B, crate::NoBackoff>();
    if same_type::<J, crate::jitter::AwsDecorrelated>() {
        // (With other rules, the previous delay it starts from may be another rule's; not
        // beside `NoBackoff`, whose `max` of 0 caps every draw.)
        if none || single && backoff.base().is_zero() {
            return Some(
                "`AwsDecorrelated` makes every delay 0 here: it draws each delay between the strategy's `base` and three times the previous delay, starting from `base`, and the `base` is 0; give `base` a value above 0, or choose another jitter",
            );
        }
        if !none && backoff.base() >= backoff.max() {
            return Some(
                "`AwsDecorrelated` has no effect here: it draws between the strategy's `base` and `max`, which this strategy makes the same (a `Constant`, or a `base` no lower than `max`); choose another jitter or strategy",
            );
        }
        // (A strategy a `when` rule inherits grows for the rules that read it otherwise.)
        if own_strategy && same_type::<B, crate::Exponential>() && !doubles(backoff) {
            return Some(
                "`AwsDecorrelated` draws each delay from the strategy's `base` and `max` and the previous delay only: an `Exponential`'s multiplier `m` has no effect beside it; use `Exponential::new(base, max, 2.0)`, or choose another jitter",
            );
        }
        // (One with no growth, an interval or unit of 0, has none to leave unread.)
        if own_strategy
            && (same_type::<B, crate::Linear>()
                || same_type::<B, crate::Fibonacci>()
                || is_polynomial::<B>())
            && !exponent_free(backoff)
        {
            return Some(
                "`AwsDecorrelated` draws each delay from the strategy's `base` and `max` and the previous delay only: a `Linear`, `Fibonacci` or `Polynomial` strategy's growth has no effect beside it; use `Exponential::new(base, max, 2.0)`, or choose another jitter",
            );
        }
    }
    if (single || all_flat) && flat(backoff) && same_type::<J, crate::jitter::Decorrelated>() {
        return Some(
            "`Decorrelated` has no effect here: it only moves the backoff exponent, which this strategy's delay does not depend on; choose another jitter or strategy",
        );
    }
    None
}

/// Whether `J` is one of this crate's jitters (a jitter of the user's may read anything of the
/// state, the exponent included).
fn crate_jitter<J>() -> bool {
    use crate::jitter::{AwsDecorrelated, Decorrelated};
    built_in_jitter::<J>() || same_type::<J, Decorrelated>() || same_type::<J, AwsDecorrelated>()
}

/// Whether `backoff`'s delay is the same for every exponent: `NoBackoff`, `Constant`, `Random`,
/// a `base` no lower than `max`, or a built-in strategy with no growth ([`exponent_free`]).
fn flat<B: Backoff>(backoff: &B) -> bool {
    same_type::<B, crate::NoBackoff>()
        || same_type::<B, crate::Constant>()
        || same_type::<B, crate::Random>()
        || backoff.base() >= backoff.max()
        || exponent_free(backoff)
}

/// Whether an [`Exponential`](crate::Exponential) `backoff` gives the delays of the same
/// strategy with `m = 2` (exponents 0 to 64: past that, both are at their `max`): a
/// multiplier that makes no difference (its delays reach `max` at once) is not refused.
fn doubles<B: Backoff>(backoff: &B) -> bool {
    use rand::SeedableRng;
    let two = crate::Exponential::new_unchecked(backoff.base(), backoff.max(), 2.0);
    let rng = &mut rand::rngs::SmallRng::seed_from_u64(0x5EED);
    (0..=64).all(|x| backoff.delay(x, rng) == two.delay(x, rng))
}

/// Whether `B` is a `Polynomial<N>`, whatever `N` (its name has no `<1>`: the default is left
/// out, so every `Polynomial<N>` is matched by the name's start).
fn is_polynomial<B: ?Sized>() -> bool {
    let polynomial = std::any::type_name::<crate::Polynomial>();
    referent(std::any::type_name::<B>())
        .strip_prefix(polynomial)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('<'))
}

/// Whether a built-in strategy's delay is the same for every exponent, asked of the strategy
/// itself (an `Exponential` with `m` = 1, a `Linear` whose interval is 0, a `Fibonacci` or
/// `Polynomial` whose unit is 0): its delays at exponents 0 to 3, 8 and 32. (A strategy of the
/// user's is not asked: its `delay` might not expect an exponent its retries never reach.)
fn exponent_free<B: Backoff>(backoff: &B) -> bool {
    use rand::SeedableRng;
    let built_in = same_type::<B, crate::Exponential>()
        || same_type::<B, crate::Linear>()
        || same_type::<B, crate::Fibonacci>()
        || is_polynomial::<B>();
    if !built_in {
        return false;
    }
    let at = |x: u32| backoff.delay(x, &mut rand::rngs::SmallRng::seed_from_u64(0x5EED));
    let first = at(0);
    [1, 2, 3, 8, 32].into_iter().all(|x| at(x) == first)
}

/// The error for a `when` rule that sets nothing of its own (SPEC section 8: "`when` without
/// overrides").
const WHEN_WITHOUT_SETTINGS: &str = "needs a setting of its own (`retries`, `backoff`, `jitter`, `scale`, `max_delay`; SPEC section 8): to retry its kind with the `on` rule's settings, put the kind in `on` (combine kinds with `or`: `on(Io::ANY.or(Timeout))`); to keep a broader `when` after it from taking its kind, write the setting it keeps, even one equal to the `on` rule's (`|s| s.retries(3)`)";

/// The same for a `when_ok` rule whose kind reads no delay from the value.
const WHEN_OK_WITHOUT_SETTINGS: &str = "needs a setting of its own (`retries`, `backoff`, `jitter`, `scale`, `max_delay`), or a kind that reads the delay from the value (`OkIf::hint`): to retry its values with the `on` rule's settings, put the kind in `on_ok` (combine kinds with `or`); to keep a broader `when_ok` after it from taking them, write the setting it keeps, even one equal to the `on` rule's";

/// The first of `keys` that is set (a setting written, or one that has no effect).
fn first_key<const N: usize>(keys: [(&'static str, bool); N]) -> Option<&'static str> {
    keys.into_iter().find_map(|(key, set)| set.then_some(key))
}

/// Whether a rule with these settings may retry: not `retries(0)`, nor a `max_delay` of zero.
fn may_retry<B, J>(rule: &RuleSettings<B, J>) -> bool {
    rule.retries != Retries::Limited(0) && rule.max_delay != Some(Duration::ZERO)
}

/// The first setting `written` for a rule that never retries (`retries(0)`, or a `max_delay`
/// of zero: `rule`'s) that has no effect there: its backoff, jitter and scale, and the one of
/// `retries` and `max_delay` that is not the reason itself.
fn unread_by_a_dead_rule<B, J>(
    rule: &RuleSettings<B, J>,
    written: Written,
) -> Option<&'static str> {
    if may_retry(rule) {
        return None;
    }
    let by_retries = rule.retries == Retries::Limited(0);
    first_key([
        ("backoff", written.backoff),
        ("jitter", written.jitter),
        ("scale", written.scale),
        ("max_delay", written.max_delay && by_retries),
        ("retries", written.retries && !by_retries),
    ])
}

/// The error for a `when` rule's setting that has no effect: written for a rule that never
/// retries, or a jitter or scale beside `NoBackoff`.
fn unread_setting<B2: Backoff, J2>(settings: &Settings<B2, J2>) -> Option<ConfigError> {
    if may_retry(&settings.rule)
        && settings.written.jitter
        && let Some(why) = dead_jitter::<B2, J2>(
            &settings.rule.backoff,
            false,
            false,
            settings.written.backoff,
        )
    {
        return Some(ConfigError::new("jitter", why));
    }
    if let Some(key) = unread_by_a_dead_rule(&settings.rule, settings.written) {
        return Some(ConfigError::new(
            key,
            "of a `when` rule has no effect: the rule never retries (`retries(0)` or a `max_delay` of zero, its own or the `on` rule's); leave it out, or allow retries",
        ));
    }
    if !may_retry(&settings.rule) {
        return None;
    }
    if scaled_to_nothing(&settings.rule, settings.written) {
        return Some(scale_to_nothing());
    }
    unread_beside_no_backoff::<B2, J2>(&settings.rule.backoff, settings.written).map(|key| {
        ConfigError::new(
            key,
            "of a `when` rule has no effect beside `NoBackoff` (or a `Constant` of 0): every delay is 0, which no built-in jitter spreads nor any scale multiplies; leave it out, or choose a strategy that waits",
        )
    })
}

/// Whether a `when` rule that may retry reads the `on` rule's jitter and scale (it set none of
/// its own): with a strategy that waits, or beside `NoBackoff` with a jitter (the inherited
/// one) that is not one of the built-in ones that wait nothing there and keep no state (a
/// jitter of the user's may add a delay, which a scale multiplies; the decorrelated ones move
/// the state every rule of the call shares).
fn reads_top<B2: Backoff, J2>(settings: &Settings<B2, J2>) -> (bool, bool) {
    let waits = may_retry(&settings.rule)
        && (!waits_nothing(&settings.rule.backoff) || !built_in_jitter::<J2>());
    (
        waits && !settings.written.jitter,
        waits && !settings.written.scale,
    )
}

/// Whether `J` is one of this crate's jitters whose delay is 0 over a strategy that waits 0
/// and that leave the call's jitter state alone (a jitter of the user's may add a delay of
/// its own; the decorrelated ones move the state every rule of the call shares).
fn built_in_jitter<J: ?Sized>() -> bool {
    use crate::jitter::{EqualJitter, FullJitter, NoJitter};
    same_type::<J, FullJitter>() || same_type::<J, EqualJitter>() || same_type::<J, NoJitter>()
}

/// Whether every delay `backoff` gives is 0: [`NoBackoff`](crate::NoBackoff), or a
/// [`Constant`](crate::Constant) of 0.
fn waits_nothing<B: Backoff + ?Sized>(backoff: &B) -> bool {
    same_type::<B, crate::NoBackoff>()
        || same_type::<B, crate::Constant>() && backoff.max().is_zero()
}

/// Whether a rule's `scale`, written, makes every delay 0: the longest its strategy gives
/// (`max`) scaled rounds to no nanosecond, beside one of this crate's jitters (which never
/// draw above `max`; a jitter of the user's may). Not beside a strategy that waits nothing
/// (refused for itself).
fn scaled_to_nothing<B: Backoff, J>(
    rule: &super::settings::RuleSettings<B, J>,
    written: Written,
) -> bool {
    let max = rule.backoff.max();
    written.scale
        && !max.is_zero()
        && super::settings::scale(max, rule.scale).is_zero()
        && crate_jitter::<J>()
}

/// The error for a scale that makes every delay 0 (see [`scaled_to_nothing`]).
fn scale_to_nothing() -> ConfigError {
    ConfigError::new(
        "scale",
        "is so small that every delay rounds to 0: the longest delay the strategy gives (its `max`) times `scale` is below half a nanosecond; raise it, or use `NoBackoff` for retries without a wait",
    )
}

/// The first of a jitter or a scale `written` beside a strategy that waits nothing (`B`:
/// [`waits_nothing`]), where a built-in jitter has no delay to spread nor the scale one to
/// multiply.
fn unread_beside_no_backoff<B: Backoff + ?Sized, J: ?Sized>(
    backoff: &B,
    written: Written,
) -> Option<&'static str> {
    if !(waits_nothing(backoff) && built_in_jitter::<J>()) {
        return None;
    }
    // (`NoJitter` written out says what it does, as `jitter = none` beside `backoff = none`
    // does in the attribute.)
    let jitter = written.jitter && !same_type::<J, crate::jitter::NoJitter>();
    first_key([("jitter", jitter), ("scale", written.scale)])
}

/// Whether `A` is `B`, or a reference to it (a kind is one through a reference too: `&AnyError`
/// takes every error as `AnyError` does), `B` without its type parameters if it has any
/// (`OkIf<()>` stands for every `OkIf<F>`). By the types' names, which need no `'static`
/// bound (an `OkIf` holds a closure that may borrow): both names are made by the same
/// compiler, as the path to the type in its crate.
fn same_type<A: ?Sized, B: ?Sized>() -> bool {
    let (a, b) = (
        referent(std::any::type_name::<A>()),
        std::any::type_name::<B>(),
    );
    if b.contains('<') {
        a.starts_with(generic_prefix::<B>())
    } else {
        a == b
    }
}

/// An error kind (a part of an `Or`), as far as its type tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    /// [`AnyError`](crate::kind::AnyError).
    Any,
    /// [`Io::ANY`](crate::kind::Io::ANY).
    IoAny,
    /// Another [`Io`](crate::kind::Io) kind (`Io::of`).
    Io,
    /// [`Timeout`](crate::kind::Timeout).
    Timeout,
    /// [`NoError`](crate::kind::NoError).
    NoError,
    /// Any other kind (a closure's, a `Predicate`, a pattern's, a user's).
    Other,
}

/// The kinds an error kind's type name combines: the parts of an
/// [`Or`](crate::kind::Or) (through nested ones), or the kind itself, each through references.
fn kind_parts(name: &str) -> Vec<Part> {
    let name = referent(name);
    if let Some((a, b)) = or_arguments(name) {
        let mut parts = kind_parts(a);
        parts.extend(kind_parts(b));
        return parts;
    }
    let io = std::any::type_name::<crate::kind::Io<0>>();
    // (`Io<0>` may be named without its parameter, which is the default one.)
    let io_path = io.split('<').next().unwrap_or(io);
    let part = if name == std::any::type_name::<crate::kind::AnyError>() {
        Part::Any
    } else if name == io {
        Part::IoAny
    } else if name
        .strip_prefix(io_path)
        .is_some_and(|rest| rest.starts_with('<'))
    {
        Part::Io
    } else if name == std::any::type_name::<crate::kind::Timeout>() {
        Part::Timeout
    } else if name == std::any::type_name::<crate::kind::NoError>() {
        Part::NoError
    } else {
        Part::Other
    };
    vec![part]
}

/// Why a kind combined with [`or`](crate::kind::ClassifyExt::or) has a part that adds nothing,
/// as far as the parts' types tell (as the attribute refuses it in a list): a part beside
/// [`AnyError`](crate::kind::AnyError), which takes every error; an `Io` kind beside
/// [`Io::ANY`](crate::kind::Io::ANY); a second [`Timeout`](crate::kind::Timeout). (`NoError`
/// adds nothing and says so: generic code may write it.)
fn part_that_adds_nothing<K: ?Sized>() -> Option<&'static str> {
    let parts = kind_parts(std::any::type_name::<K>());
    let count = |p: Part| parts.iter().filter(|&&q| q == p).count();
    let others = parts.iter().filter(|&&p| p != Part::NoError).count();
    if count(Part::Any) > 0 && others > 1 {
        Some(
            "has a part that adds nothing: `AnyError` takes every error, the kinds beside it included; leave them out",
        )
    } else if count(Part::IoAny) > 0 && count(Part::IoAny) + count(Part::Io) > 1 {
        Some(
            "has a part that adds nothing: `Io::ANY` takes every I/O error, the `Io` kinds beside it included; leave them out",
        )
    } else if count(Part::Timeout) > 1 {
        Some("lists `Timeout` twice; leave one out")
    } else {
        None
    }
}

/// The name of the type a reference type's name points to, through every `&` and `&mut`,
/// `Box`, `Arc` and `Rc` (the name itself for any other type).
fn referent(mut name: &str) -> &str {
    // (`Backoff` and `Jitter` are implemented through these: `Box<Linear>` is a `Linear`.)
    const POINTERS: [&str; 3] = ["alloc::boxed::Box<", "alloc::sync::Arc<", "alloc::rc::Rc<"];
    loop {
        let rest = name.trim_start();
        if let Some(rest) = rest.strip_prefix('&') {
            let rest = rest.trim_start();
            name = rest.strip_prefix("mut ").unwrap_or(rest);
        } else if let Some(inner) = POINTERS
            .iter()
            .find_map(|p| rest.strip_prefix(p)?.strip_suffix('>'))
        {
            name = inner;
        } else {
            return rest;
        }
    }
}

/// `T`'s name up to and including its first `<` (all of it, for a type without parameters).
fn generic_prefix<T: ?Sized>() -> &'static str {
    let name = std::any::type_name::<T>();
    name.find('<').map_or(name, |i| &name[..=i])
}

/// Whether the value kind `K` never asks for a delay of its own: an [`OkIf`](crate::kind::OkIf)
/// (without a hint), a reference to one, or an [`Or`](crate::kind::Or) of such kinds. Read
/// from the type's name, as [`same_type`] does; any other kind (one with a hint, one of the
/// user's) may ask for a delay, and its rule is not checked (never wrongly refused).
fn plain_value_kind<K: ?Sized>() -> bool {
    fn plain(name: &str, ok_if: &str) -> bool {
        let name = referent(name);
        if name.starts_with(ok_if) {
            return true;
        }
        or_arguments(name).is_some_and(|(a, b)| plain(a, ok_if) && plain(b, ok_if))
    }
    plain(
        std::any::type_name::<K>(),
        generic_prefix::<crate::kind::OkIf<()>>(),
    )
}

/// The two type arguments of an [`Or`](crate::kind::Or) type's name (split at the comma
/// outside any brackets), or `None` for another type.
fn or_arguments(name: &str) -> Option<(&str, &str)> {
    let args = name
        .strip_prefix(generic_prefix::<crate::kind::Or<(), ()>>())?
        .strip_suffix('>')?;
    let mut depth = 0usize;
    for (i, c) in args.char_indices() {
        match c {
            '<' | '(' | '[' => depth += 1,
            '>' | ')' | ']' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => return Some((&args[..i], &args[i + 1..])),
            _ => {}
        }
    }
    None
}

/// The rules a builder holds before its first [`when`](PolicyBuilder::when) or
/// [`when_ok`](PolicyBuilder::when_ok): none. A `when` rule starts from the `on` rule's
/// settings as they are when it is added, so those settings are set before it; set after, they
/// would silently not reach the rule (the attribute has no order: its `when` clauses take the
/// top-level settings wherever they are written).
#[diagnostic::on_unimplemented(
    message = "the `on` rule's settings are set before any `when`",
    label = "set after a `when`, this would not reach that rule's settings, which were copied when it was added",
    note = "move `retries`, `backoff`, `jitter`, `max_delay` and `scale` before the first `.when(..)` / `.when_ok(..)`, or set them in the rule's closure"
)]
pub trait NoRuleYet {}
impl NoRuleYet for () {}

impl<W, K, B, J, T, S, F, C, X> PolicyBuilder<W, K, B, J, T, S, F, C, X> {
    fn fail(mut self, e: ConfigError) -> Self {
        self.error.get_or_insert(e);
        self
    }

    fn map_settings<B2, J2>(
        self,
        f: impl FnOnce(Settings<B, J>) -> Settings<B2, J2>,
    ) -> PolicyBuilder<W, K, B2, J2, T, S, F, C, X> {
        let b = map_part!(self, settings, f);
        // An invalid setting is the builder's error too, so that the first invalid value given,
        // whichever part it went to, is the one `build` reports.
        match b.policy.settings.error {
            Some(e) => b.fail(e),
            None => b,
        }
    }

    /// At most `n` retries of the `on` rule (default 3); negative = forever, 0 = never.
    pub fn retries(self, n: impl Into<Retries>) -> Self
    where
        W: NoRuleYet,
    {
        let n = n.into();
        self.map_settings(|s| s.retries(n))
    }

    /// The `max_delay` budget of the `on` rule: total time since the first attempt; a retry
    /// is made only if it can start before the budget is spent. Default: infinite.
    pub fn max_delay(self, budget: Duration) -> Self
    where
        W: NoRuleYet,
    {
        self.map_settings(|s| s.max_delay(budget))
    }

    /// `max_delay` in seconds, negative = infinite. NaN or infinite is an error.
    pub fn max_delay_secs(self, secs: f64) -> Self
    where
        W: NoRuleYet,
    {
        self.map_settings(|s| s.max_delay_secs(secs))
    }

    /// Multiplies every delay of the `on` rule by `factor` (finite, > 0), applied last.
    pub fn scale(self, factor: f64) -> Self
    where
        W: NoRuleYet,
    {
        self.map_settings(|s| s.scale(factor))
    }

    /// The backoff strategy of the `on` rule (default `exponential(100 ms, 20 s, 2)`).
    pub fn backoff<B2>(self, backoff: B2) -> PolicyBuilder<W, K, B2, J, T, S, F, C, X>
    where
        W: NoRuleYet,
    {
        self.map_settings(|s| s.backoff(backoff))
    }

    /// The jitter algorithm of the `on` rule (default [`FullJitter`]).
    pub fn jitter<J2>(self, jitter: J2) -> PolicyBuilder<W, K, B, J2, T, S, F, C, X>
    where
        W: NoRuleYet,
    {
        self.map_settings(|s| s.jitter(jitter))
    }

    /// Seeds the per-call random number generator: every call then draws the same jitter
    /// sequence. For tests and simulations; by default each call is seeded from the thread's
    /// random generator. A throttle's decisions still draw anew for each call (from the seed
    /// and the count of throttle draws made on the thread, so a single-threaded run is
    /// reproducible): one draw for all would reject every call or none. (Seeds 0 and
    /// `u64::MAX` give the same sequence: the seed is kept in one word beside its absence.)
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Which errors the `on` rule retries (default: every error). Combine kinds with
    /// [`ClassifyExt::or`](crate::kind::ClassifyExt::or) (a part that adds nothing, such as
    /// `Timeout` beside `AnyError`, is an error of [`build`](Self::build)): called again, `on`
    /// replaces the kind, as every setter replaces its value.
    pub fn on<K2>(self, kind: K2) -> PolicyBuilder<W, K2, B, J, T, S, F, C, X> {
        let mut b = map_part!(self, on, |_| kind);
        b.checks.on_never = same_type::<K2, crate::kind::NoError>();
        b.checks.on_written = true;
        match part_that_adds_nothing::<K2>() {
            Some(why) => b.fail(ConfigError::new("on", why)),
            None => b,
        }
    }

    /// Adds a rule: failures matching `kind` use the settings `f` makes from the current
    /// `on` settings. Rules are tried in the order added, before the `on` rule, so a narrower
    /// kind goes first: with `std::io::Error`, a timed-out attempt fails with an error of kind
    /// `TimedOut`, which a `when(Io::ANY, ..)` added before a `when(Timeout, ..)` takes. The `on`
    /// rule's settings are therefore set before the first `when` (or `when_ok`): `retries`,
    /// `backoff`, `jitter`, `max_delay` or `scale` after one would not reach it, and is a
    /// compile error ([`NoRuleYet`]). A rule that sets nothing of its own (`|s| s`) is an
    /// error of [`build`](Self::build) (SPEC section 8): put its kind in [`on`](Self::on), or,
    /// to keep a broader rule after it from taking the kind, write the setting it keeps.
    pub fn when<K2, B2, J2>(
        self,
        kind: K2,
        f: impl FnOnce(Settings<B, J>) -> Settings<B2, J2>,
    ) -> PolicyBuilder<(W, Rule<K2, RuleSettings<B2, J2>>), K, B, J, T, S, F, C, X>
    where
        B: Clone,
        J: Clone,
        B2: Backoff,
        J2: Jitter,
    {
        let settings = f(self.policy.settings.inherited());
        let max_delay = settings.rule.max_delay;
        let shortest = settings.rule.shortest_delay();
        let mut checks = self.checks;
        let unread = checks.add_rule(&settings);
        checks.error_whens_retry |= may_retry(&settings.rule);
        let dead = checks
            .never_applies::<K2>()
            .or_else(part_that_adds_nothing::<K2>);
        checks.add_when::<K2>();
        let written = settings.says_something();
        let mut b = map_part!(self, whens, |whens| (whens, Rule::new(kind, settings.rule)));
        b.checks = checks;
        if let Some(why) = dead {
            b = b.fail(ConfigError::new("when", why));
        }
        if !written {
            b = b.fail(ConfigError::new("when", WHEN_WITHOUT_SETTINGS));
        }
        if let Some(e) = unread {
            b = b.fail(e);
        }
        b.checks.rule_max_delay = b.checks.rule_max_delay.max(max_delay);
        b.checks.rule_shortest = b.checks.rule_shortest.max(shortest);
        b.checks.rule_past_max_delay |= past(shortest, max_delay);
        match settings.error {
            Some(e) => b.fail(e),
            None => b,
        }
    }

    /// Adds a rule for successful values (SPEC section 13): values matching the `Ok(..)` kind
    /// `kind` (an [`OkIf`](crate::kind::OkIf), with [`OkIf::hint`](crate::kind::OkIf::hint)
    /// to read the delay from the value) count as failed attempts and use the settings `f`
    /// makes from the current `on` settings. Rules are tried in the order added, with the
    /// error rules; a value is only ever matched by value rules. A rule that sets nothing of
    /// its own, for a kind that reads no delay from the value (an `OkIf` without a hint), is
    /// an error of [`build`](Self::build): put its kind in [`on_ok`](Self::on_ok), or write
    /// the setting it keeps.
    ///
    /// ```
    /// use std::time::Duration;
    /// use retry_runtime::kind::OkIf;
    /// use retry_runtime::{NoBackoff, Policy};
    ///
    /// // (status, Retry-After in seconds)
    /// let busy = OkIf(|r: &(u16, u64)| r.0 == 429).hint(|r: &(u16, u64)| Some(Duration::from_secs(r.1)));
    /// let policy = Policy::builder().backoff(NoBackoff).when_ok(busy, |s| s.retries(10)).build()?;
    /// # let _ = policy;
    /// # Ok::<(), retry_runtime::ConfigError>(())
    /// ```
    pub fn when_ok<K2, B2, J2>(
        self,
        kind: K2,
        f: impl FnOnce(Settings<B, J>) -> Settings<B2, J2>,
    ) -> PolicyBuilder<(W, OkRule<K2, RuleSettings<B2, J2>>), K, B, J, T, S, F, C, X>
    where
        B: Clone,
        J: Clone,
        B2: Backoff,
        J2: Jitter,
    {
        let settings = f(self.policy.settings.inherited());
        let mut checks = self.checks;
        let unread = checks.add_rule(&settings);
        let max_delay = settings.rule.max_delay;
        // A value that asks for no delay of its own waits the rule's backoff: checked like an
        // error rule's. (Another kind may give a hint: not checked.)
        let shortest = settings
            .rule
            .shortest_delay()
            .filter(|_| plain_value_kind::<K2>());
        let written = settings.says_something();
        let mut b = map_part!(self, whens, |whens| (
            whens,
            OkRule::new(kind, settings.rule)
        ));
        b.checks = checks;
        // (A kind that may read a value's delay, `OkIf::hint`, says something of its own.)
        if !written && plain_value_kind::<K2>() {
            b = b.fail(ConfigError::new("when_ok", WHEN_OK_WITHOUT_SETTINGS));
        }
        b.checks.rule_max_delay = b.checks.rule_max_delay.max(max_delay);
        b.checks.value_shortest = b.checks.value_shortest.max(shortest);
        b.checks.value_past_max_delay |= past(shortest, max_delay);
        if let Some(e) = unread {
            b = b.fail(e);
        }
        match settings.error {
            Some(e) => b.fail(e),
            None => b,
        }
    }

    /// A per-attempt timeout. `Duration::ZERO` is an error (an attempt could never succeed).
    pub fn timeout(self, limit: Duration) -> PolicyBuilder<W, K, B, J, T::With, S, F, C, X>
    where
        T: SetTimeout<PerAttempt>,
    {
        let zero = limit.is_zero();
        let b = self.map_timeout(|t| t.set_timeout(PerAttempt(Some(limit))));
        if zero {
            b.fail(ConfigError::new(
                "timeout",
                "must be > 0 (use a negative value for none)",
            ))
        } else {
            b
        }
    }

    /// A per-attempt timeout in seconds; negative = infinite; 0, NaN or infinite is an error.
    pub fn timeout_secs(self, secs: f64) -> PolicyBuilder<W, K, B, J, T::With, S, F, C, X>
    where
        T: SetTimeout<PerAttempt>,
    {
        match limit_from_secs("timeout", secs) {
            Ok(Some(d)) => self.timeout(d),
            Ok(None) => self.map_timeout(|t| t.set_timeout(PerAttempt(None))),
            Err(e) => self
                .map_timeout(|t| t.set_timeout(PerAttempt(None)))
                .fail(e),
        }
    }

    /// A per-attempt timeout from measured latency (SPEC section 15b; see [`Adaptive`]): each
    /// attempt's limit is `factor` × a percentile of the recent attempt latencies, clamped to
    /// `[min, max]`; each successful attempt is recorded, and each one its own timeout cut, as
    /// the time it ran (see [`Adaptive`]). Replaces a
    /// [`timeout`](Self::timeout).
    ///
    /// ```
    /// use std::time::Duration;
    /// use retry_runtime::Policy;
    /// use retry_runtime::latency::Latencies;
    /// use retry_runtime::timeout::Adaptive;
    ///
    /// static LATENCIES: Latencies = Latencies::new();
    /// let policy = Policy::builder()
    ///     .adaptive_timeout(Adaptive::new(&LATENCIES, 99.9, 2.0, Duration::from_millis(50), Duration::from_secs(5))?)
    ///     .build()?;
    /// let r: Result<u32, std::io::Error> = policy.call(|attempt| {
    ///     assert_eq!(attempt.timeout(), Some(Duration::from_secs(5))); // no samples yet
    ///     Ok(1)
    /// });
    /// assert_eq!(LATENCIES.samples(), 1);
    /// # r?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn adaptive_timeout<'a>(
        self,
        timeout: Adaptive<'a>,
    ) -> PolicyBuilder<W, K, B, J, T::With, S, F, C, X>
    where
        T: SetTimeout<Adaptive<'a>>,
    {
        self.map_timeout(|t| t.set_timeout(timeout))
    }

    /// Hedges async attempts (SPEC section 15; see [`crate::hedge`]): an attempt still
    /// running after the hedge's delay gets a sibling, the first success wins.
    /// [`call_async`](Policy::call_async) runs the rounds; a blocking [`call`](Policy::call)
    /// of a hedged policy is a compile error (a thread cannot run two attempts at once). A
    /// [`timeout`](Self::timeout), [`adaptive_timeout`](Self::adaptive_timeout) or
    /// [`deadline`](Self::deadline) set before or after the hedge applies to each attempt.
    /// Each hedge needs a free slot of the policy's [`limit`](Self::limit), if any, beside
    /// the one its attempt holds: [`build`](Self::build) refuses a hedge beside a limit of
    /// one slot.
    ///
    /// ```
    /// use std::time::Duration;
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use retry_runtime::Policy;
    /// use retry_runtime::hedge::Hedge;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let policy = Policy::builder().hedge(Hedge::after(Duration::from_millis(50), 1)?).build()?;
    /// let started = AtomicU32::new(0);
    /// let start = tokio::time::Instant::now();
    /// let r: std::io::Result<u32> = policy
    ///     .call_async(|_| async {
    ///         // The first attempt hangs for a second; the hedge, started at 50 ms, answers.
    ///         let n = started.fetch_add(1, Ordering::Relaxed);
    ///         let wait = if n == 0 { 1000 } else { 10 };
    ///         tokio::time::sleep(Duration::from_millis(wait)).await;
    ///         Ok(n)
    ///     })
    ///     .await;
    /// assert_eq!(r?, 1);
    /// assert_eq!(start.elapsed(), Duration::from_millis(60));
    /// # Ok(()) }
    /// ```
    pub fn hedge(self, hedge: Hedge<'_>) -> PolicyBuilder<W, K, B, J, Hedged<'_, T>, S, F, C, X> {
        self.map_timeout(|timeout| Hedged { timeout, hedge })
    }

    /// A deadline for the whole call, from the start of its first attempt (SPEC section 12):
    /// an async attempt runs under the smaller of its timeout and the time left, and is
    /// cancelled when the deadline passes (the call then returns `E::from(Elapsed)`, which
    /// needs `E: From<Elapsed>` for [`call_async`](Policy::call_async)); a blocking attempt
    /// sees it in [`Attempt::remaining`](crate::Attempt::remaining); no retry is made once it
    /// has passed, nor one whose backoff would end at or after it (the last failure is then
    /// returned unchanged). `max_delay` stays as it is. Zero is an error.
    ///
    /// ```
    /// use std::time::Duration;
    /// use retry_runtime::{Constant, NoJitter, Policy};
    /// use retry_runtime::time::VirtualTime;
    ///
    /// let time = VirtualTime::new();
    /// let policy = Policy::builder()
    ///     .retries(10)
    ///     .backoff(Constant::new(Duration::from_millis(100)))
    ///     .jitter(NoJitter)
    ///     .deadline(Duration::from_millis(250))
    ///     .env(time.clone())
    ///     .build()?;
    /// let mut attempts = 0;
    /// let r: Result<(), &str> = policy.call(|_| { attempts += 1; Err("busy") });
    /// // Attempts at 0, 100 and 200 ms; the next backoff would end at 300 ms, past the deadline.
    /// assert_eq!((r, attempts), (Err("busy"), 3));
    /// assert_eq!(time.slept(), Duration::from_millis(200));
    /// # Ok::<(), retry_runtime::ConfigError>(())
    /// ```
    pub fn deadline(
        self,
        limit: Duration,
    ) -> PolicyBuilder<W, K, B, J, WithDeadline<T>, S, F, C, X> {
        let zero = limit.is_zero();
        let b = self.with_deadline(Some(limit));
        if zero {
            b.fail(ConfigError::new(
                "deadline",
                "must be > 0 (use a negative value for none)",
            ))
        } else {
            b
        }
    }

    /// A deadline for the whole call in seconds; negative = none; 0, NaN or infinite is an
    /// error. See [`deadline`](Self::deadline).
    pub fn deadline_secs(
        self,
        secs: f64,
    ) -> PolicyBuilder<W, K, B, J, WithDeadline<T>, S, F, C, X> {
        match limit_from_secs("deadline", secs) {
            Ok(Some(d)) => self.deadline(d),
            Ok(None) => self.with_deadline(None),
            Err(e) => self.with_deadline(None).fail(e),
        }
    }

    fn with_deadline(
        self,
        deadline: Option<Duration>,
    ) -> PolicyBuilder<W, K, B, J, WithDeadline<T>, S, F, C, X> {
        self.map_timeout(|timeout| WithDeadline { timeout, deadline })
    }

    fn map_timeout<T2>(self, f: impl FnOnce(T) -> T2) -> PolicyBuilder<W, K, B, J, T2, S, F, C, X> {
        map_part!(self, timeout, f)
    }

    /// Called once when an attempt succeeds: any `Fn()`.
    pub fn on_success<S2: Fn()>(self, callback: S2) -> PolicyBuilder<W, K, B, J, T, S2, F, C, X> {
        map_part!(self, on_success, |_| callback)
    }

    /// Called after every failed attempt (the last one too), before the retry decision, with
    /// the error and the number of retries made so far (the failed attempt's
    /// [`Attempt::retries`](crate::Attempt::retries): 0 for the first attempt): any
    /// `Fn(&E, u32)`.
    pub fn on_error<E, F2: Fn(&E, u32)>(
        self,
        callback: F2,
    ) -> PolicyBuilder<W, K, B, J, T, S, F2, C, X> {
        map_part!(self, on_error, |_| callback)
    }

    /// The clock and sleepers (default [`DefaultEnv`]); tests pass a
    /// [`VirtualTime`](crate::time::VirtualTime).
    pub fn env<C2>(self, env: C2) -> PolicyBuilder<W, K, B, J, T, S, F, C2, X> {
        map_part!(self, env, |_| env)
    }

    fn map_extras<X2>(self, f: impl FnOnce(X) -> X2) -> PolicyBuilder<W, K, B, J, T, S, F, C, X2> {
        map_part!(self, extras, f)
    }

    /// The policy, or the first invalid value given to the builder, or a setting another one
    /// makes dead: an `on` kind a `when` rule takes first (`on(Io::ANY)` beside
    /// `when(AnyError, ..)`: the `when` rules are tried before `on`), a hedge that could never run beside its attempt (one due no sooner than the
    /// attempt's timeout, an adaptive timeout's `max`, or the deadline, all of which cut the
    /// attempt first), or a timeout (an adaptive timeout's `min`) or `max_delay` no shorter than
    /// the deadline, which always decides first.
    pub fn build(
        self,
    ) -> Result<Policy<W, K, RuleSettings<B, J>, T, S, F, Seeded<C>, X>, ConfigError>
    where
        T: crate::timeout::AttemptTimeout,
        B: Backoff,
        J: Jitter,
    {
        if let Some(e) = self.error {
            return Err(e);
        }
        if let Some(why) = self.checks.on_never_applies::<K>() {
            return Err(ConfigError::new("on", why));
        }
        let p = self.policy;
        if let Some(hedge) = p.timeout.hedge()
            && let crate::hedge::After::Fixed(after) = hedge.when()
            && let Some(cut) = [p.timeout.longest(), p.timeout.deadline()]
                .into_iter()
                .flatten()
                .min()
            && after >= cut
        {
            return Err(ConfigError::new(
                "hedge",
                "must be due before the attempt's timeout (an adaptive timeout's `max`) and the deadline: every attempt would be cut first, and no hedge would ever run beside it",
            ));
        }
        // A hedge runs beside the attempt it hedges, each holding a slot of the limit: with
        // one slot, none ever could (it would go out only once that attempt has failed).
        if self.checks.limit_of_one && p.timeout.hedge().is_some() {
            return Err(ConfigError::new(
                "hedge",
                "needs a concurrency limit of at least 2 slots: a hedge holds a slot beside the attempt it hedges, and with one slot none could ever run beside it (it would only follow a failure); raise the limit's `max_in_flight`, or leave the hedge out",
            ));
        }
        // Settings no rule reads (as the attribute refuses them).
        let on_retries =
            (!self.checks.on_never || self.checks.on_values) && may_retry(&p.settings.rule);
        if !on_retries && !self.checks.whens_retry {
            let written = p.settings.written;
            let unread = first_key([
                ("backoff", written.backoff),
                ("jitter", written.jitter),
                ("scale", written.scale),
                (
                    "max_delay",
                    written.max_delay && p.settings.rule.max_delay != Some(Duration::ZERO),
                ),
                (
                    "retries",
                    written.retries && p.settings.rule.retries != Retries::Limited(0),
                ),
                ("hint", self.checks.hinted),
                ("on_retry", self.checks.on_retry),
            ]);
            if let Some(key) = unread {
                return Err(ConfigError::new(
                    key,
                    "has no effect: no rule ever retries (the `on` rule has `retries(0)`, a `max_delay` of zero, or `on(NoError)` with no `on_ok`, and no `when` rule retries); leave it out, or allow retries",
                ));
            }
        }
        // The `on` rule never retries, but `when` rules do: a setting of the `on` rule that
        // each of them that retries sets for itself is read by no rule (as the attribute
        // refuses it). (The reason the `on` rule never retries is not counted.)
        if !on_retries && self.checks.whens_retry {
            let written = p.settings.written;
            let rule = &p.settings.rule;
            let unread = first_key([
                (
                    "retries",
                    written.retries
                        && rule.retries != Retries::Limited(0)
                        && !self.checks.retrying_inherit_retries,
                ),
                ("backoff", written.backoff && !self.checks.inherit_backoff),
                ("jitter", written.jitter && !self.checks.top_jitter_read),
                ("scale", written.scale && !self.checks.top_scale_read),
                (
                    "max_delay",
                    written.max_delay
                        && rule.max_delay != Some(Duration::ZERO)
                        && !self.checks.inherit_max_delay,
                ),
            ]);
            if let Some(key) = unread {
                return Err(ConfigError::new(
                    key,
                    "has no effect: the `on` rule never retries (`retries(0)`, a `max_delay` of zero, or `on(NoError)` with no `on_ok`), and no `when` or `when_ok` rule that retries reads it (each sets its own, or, beside `NoBackoff`, has no delay for it to act on); leave it out",
                ));
            }
        }
        // Settings of the `on` rule that every `when` replaces: the `when` rules take every
        // error the `on` rule would retry (rules are tried before it), it takes no value (no
        // `on_ok`), and each rule sets its own value (as the attribute refuses them).
        let taken = |part: &Part| match part {
            Part::Timeout => self.checks.timeout,
            Part::Io | Part::IoAny => self.checks.every_io,
            Part::NoError => true,
            Part::Any | Part::Other => false,
        };
        let on_taken = !self.checks.on_values
            && (self.checks.every_error
                || self.checks.on_written
                    && kind_parts(std::any::type_name::<K>()).iter().all(taken));
        if on_taken {
            let written = p.settings.written;
            let replaced = first_key([
                ("retries", written.retries && !self.checks.inherit_retries),
                ("backoff", written.backoff && !self.checks.inherit_backoff),
                ("jitter", written.jitter && !self.checks.top_jitter_read),
                ("scale", written.scale && !self.checks.top_scale_read),
                (
                    "max_delay",
                    written.max_delay && !self.checks.inherit_max_delay,
                ),
            ]);
            if let Some(key) = replaced {
                return Err(ConfigError::new(
                    key,
                    "has no effect: the `when` rules take every error the `on` rule would retry (rules are tried before `on`), and each sets its own; leave it out, or set it in the rules that should use it",
                ));
            }
        }
        // A hint reads the errors a rule retries: with only values retried (`on(NoError)`
        // beside an `on_ok` kind or a `when_ok` rule, and no `when` rule on errors that
        // retries), it has none to read. (With no retry at all, it was refused above.)
        let errors_retried =
            (!self.checks.on_never && may_retry(&p.settings.rule)) || self.checks.error_whens_retry;
        if self.checks.hinted && !errors_retried && (on_retries || self.checks.whens_retry) {
            return Err(ConfigError::new(
                "hint",
                "has no effect: it reads the errors a rule retries, and here only values are retried (`on(NoError)`, and no `when` on an error retries); a value's delay is read by its kind (`OkIf::hint`)",
            ));
        }
        if on_retries && scaled_to_nothing(&p.settings.rule, p.settings.written) {
            return Err(scale_to_nothing());
        }
        if on_retries
            && let Some(key) =
                unread_beside_no_backoff::<B, J>(&p.settings.rule.backoff, p.settings.written)
            && !(key == "jitter" && self.checks.top_jitter_read)
            && !(key == "scale" && self.checks.top_scale_read)
        {
            return Err(ConfigError::new(
                key,
                "has no effect beside `NoBackoff` (or a `Constant` of 0): every delay is 0, which no built-in jitter spreads nor any scale multiplies; leave it out, or choose a strategy that waits",
            ));
        }
        // A jitter the `on` rule's strategy gives nothing to do, where that pair is read: by
        // the `on` rule, or by `when` rules that inherit both (unless a `when` rule with a
        // strategy of its own reads the jitter). "One rule": one rule that retries (the
        // others move no jitter state).
        let single = u32::from(on_retries).saturating_add(self.checks.retrying_whens) == 1;
        // A `when` rule that is the one rule that retries: its jitter judged as the `on`
        // rule's is in a policy of one rule (`when` sees no more than its own rule when it is
        // added).
        if single
            && !on_retries
            && let Some(why) = self.checks.jitter_if_alone
        {
            return Err(ConfigError::new("jitter", why));
        }
        if (on_retries || self.checks.top_jitter_read)
            && p.settings.written.jitter
            && !self.checks.top_jitter_read_elsewhere
            && let Some(why) = dead_jitter::<B, J>(
                &p.settings.rule.backoff,
                single,
                // Every rule that retries waits a delay the exponent does not move: the `on`
                // rule's strategy, read by the `when` rules without one of their own, is
                // judged in `dead_jitter`; the others' own were noted as they were added.
                !self.checks.when_reads_exponent,
                !self.checks.top_backoff_read_elsewhere,
            )
        {
            return Err(ConfigError::new("jitter", why));
        }
        // The `on` rule's shortest delay, when it applies to failures that wait its backoff:
        // errors (not with `NoError`) whose delay no hint may choose, or values of an `on_ok`
        // kind that asks for no delay of its own.
        let on_checked =
            !self.checks.on_never && !self.checks.hinted || self.checks.on_plain_values;
        let shortest = if on_checked {
            p.settings.rule.shortest_delay()
        } else {
            None
        };
        if self.checks.value_past_max_delay {
            return Err(ConfigError::new(
                "max_delay",
                "of a `when_ok` rule must be above the shortest delay its backoff gives (with its jitter and scale): a retry is made only if its backoff ends before `max_delay` is spent, so the rule would never retry; lengthen it, shorten the backoff, or read the delay from the value (`OkIf::hint`)",
            ));
        }
        // A retry is made only if it can start before its rule's `max_delay` is spent: a rule
        // whose shortest delay is not below it never retries (unless a hint chooses the delay).
        if past(shortest, p.settings.rule.max_delay) {
            return Err(ConfigError::new(
                "max_delay",
                "must be above the shortest delay the backoff gives (with its jitter and scale): a retry is made only if its backoff ends before `max_delay` is spent, so no retry ever would be; lengthen it, or shorten the backoff",
            ));
        }
        if !self.checks.hinted && self.checks.rule_past_max_delay {
            return Err(ConfigError::new(
                "max_delay",
                "of a `when` rule must be above the shortest delay its backoff gives (with its jitter and scale): a retry is made only if its backoff ends before `max_delay` is spent, so the rule would never retry; lengthen it, or shorten the backoff",
            ));
        }
        // Bounds the deadline makes dead (as the attribute refuses them).
        if let Some(deadline) = p.timeout.deadline() {
            // With no retry and no hedge, the only attempt runs under the smaller of its
            // timeout and the deadline: a timeout shorter than the deadline always cuts first.
            if !on_retries
                && !self.checks.whens_retry
                && p.timeout.hedge().is_none()
                && p.timeout.longest().is_some_and(|t| t < deadline)
            {
                return Err(ConfigError::new(
                    "deadline",
                    "has no effect: no rule retries and no hedge is sent, and the only attempt is always cut first by its timeout (an adaptive timeout's `max`), shorter than the deadline; leave it out, or allow retries",
                ));
            }
            if p.timeout.shortest().is_some_and(|t| t >= deadline) {
                return Err(ConfigError::new(
                    "timeout",
                    "must be below the deadline (an adaptive timeout's `min` too): every attempt would be cut by the deadline first, and the timeout would never apply",
                ));
            }
            // (Whatever asks for the delay: no retry starts after the deadline, a hinted one
            // included.)
            if (!self.checks.on_never || self.checks.on_values)
                && p.settings.rule.max_delay.is_some_and(|m| m >= deadline)
            {
                return Err(ConfigError::new(
                    "max_delay",
                    "must be below the deadline: no retry starts after the deadline, which comes first, so it would never apply",
                ));
            }
            if self.checks.rule_max_delay.is_some_and(|m| m >= deadline) {
                return Err(ConfigError::new(
                    "max_delay",
                    "of a `when` rule must be below the deadline: no retry starts after the deadline, which comes first, so it would never apply (`no_max_delay()` bounds the rule by the deadline alone)",
                ));
            }
            // A retry is made only if its backoff ends before the deadline: a rule whose
            // shortest delay is not below it never retries (unless a hint chooses the delay).
            if shortest.is_some_and(|d| d >= deadline) {
                return Err(ConfigError::new(
                    "backoff",
                    "must be able to give a delay below the deadline (with its jitter and scale): a retry whose backoff would end at or after the deadline is not made, so no retry ever would be; shorten the backoff, or lengthen the deadline",
                ));
            }
            if !self.checks.hinted && self.checks.rule_shortest.is_some_and(|d| d >= deadline) {
                return Err(ConfigError::new(
                    "backoff",
                    "of a `when` rule must be able to give a delay below the deadline (with its jitter and scale): a retry whose backoff would end at or after the deadline is not made, so the rule would never retry; shorten its backoff, or lengthen the deadline",
                ));
            }
            if self.checks.value_shortest.is_some_and(|d| d >= deadline) {
                return Err(ConfigError::new(
                    "backoff",
                    "of a `when_ok` rule must be able to give a delay below the deadline (with its jitter and scale): a retry whose backoff would end at or after the deadline is not made, so the rule would never retry; shorten its backoff, lengthen the deadline, or read the delay from the value (`OkIf::hint`)",
                ));
            }
        }
        Ok(Policy {
            whens: p.whens,
            on: p.on,
            settings: p.settings.build()?,
            timeout: p.timeout,
            on_success: p.on_success,
            on_error: p.on_error,
            env: Seeded {
                env: p.env,
                seed: self.seed,
            },
            extras: p.extras,
        })
    }
}

impl<W, K, B, J, T, S, F, C, Bu, Br, H, R, N, V, Fb, Th, L>
    PolicyBuilder<W, K, B, J, T, S, F, C, Extras<Bu, Br, H, R, N, V, Fb, Th, L>>
{
    /// Shares a retry budget: every call earns tokens, every retry spends them, and a retry
    /// that finds the budget empty is not made.
    ///
    /// ```
    /// use std::time::Duration;
    /// use retry_runtime::{CircuitBreaker, NoBackoff, Policy, RetryBudget};
    ///
    /// let budget = RetryBudget::new(1.0, 0.0, 1.0)?;
    /// let breaker = CircuitBreaker::new(10, 5, 0.5, Duration::from_secs(30), 2)?;
    /// let policy = Policy::builder()
    ///     .retries(5)
    ///     .backoff(NoBackoff)
    ///     .budget(&budget)
    ///     .breaker(&breaker)
    ///     .hint(|e: &std::io::Error| None)
    ///     .on_retry(|_: &std::io::Result<()>, info| eprintln!("retry {} in {:?}", info.retry, info.delay))
    ///     .build()?;
    /// let mut attempts = 0;
    /// let r: std::io::Result<()> = policy.call(|_| {
    ///     attempts += 1;
    ///     Err(std::io::ErrorKind::Other.into())
    /// });
    /// assert!(r.is_err());
    /// assert_eq!(attempts, 2); // one token: one retry
    /// # Ok::<(), retry_runtime::ConfigError>(())
    /// ```
    ///
    /// `budget` is a [`RetryBudget`] or a fleet's shared budget (feature `redis`), itself or
    /// behind a reference, `Box`, `Rc`, `Arc` or `LazyLock` ([`AsBudget`]), borrowed by the
    /// policy: it outlives the policy (a `static`, or a local declared before it).
    pub fn budget<'a, G: AsBudget + ?Sized>(
        self,
        budget: &'a G,
    ) -> PolicyBuilder<W, K, B, J, T, S, F, C, Extras<G::Ref<'a>, Br, H, R, N, V, Fb, Th, L>> {
        self.map_extras(|x| Extras {
            budget: budget.as_budget(),
            breaker: x.breaker,
            hint: x.hint,
            on_retry: x.on_retry,
            describe: x.describe,
            on_ok: x.on_ok,
            fallback: x.fallback,
            throttle: x.throttle,
            limit: x.limit,
        })
    }

    /// Shares a circuit breaker: while it is open, attempts fail fast with
    /// `E::from(Open)` without running the body.
    ///
    /// `breaker` is a [`CircuitBreaker`] or a fleet's shared breaker (feature `redis`), itself
    /// or behind a reference, `Box`, `Rc`, `Arc` or `LazyLock` ([`AsBreaker`]), borrowed by
    /// the policy: it outlives the policy (a `static`, or a local declared before it).
    pub fn breaker<'a, G: AsBreaker + ?Sized>(
        self,
        breaker: &'a G,
    ) -> PolicyBuilder<W, K, B, J, T, S, F, C, Extras<Bu, G::Ref<'a>, H, R, N, V, Fb, Th, L>> {
        self.map_extras(|x| Extras {
            budget: x.budget,
            breaker: breaker.as_breaker(),
            hint: x.hint,
            on_retry: x.on_retry,
            describe: x.describe,
            on_ok: x.on_ok,
            fallback: x.fallback,
            throttle: x.throttle,
            limit: x.limit,
        })
    }

    /// A delay asked for by the failure itself (a `Retry-After` header, say): when the closure
    /// returns one, it replaces the computed backoff, still bounded by `max_delay`. It is
    /// called only for a failure that a rule retries and whose rule has a retry left (an error
    /// no rule matches, or the last failure of a rule, is not read). It may be called more
    /// than once for one failure, as a hedged round asks it again for the failure that decides
    /// the round: keep it a plain read of the error.
    pub fn hint<E, H2: Fn(&E) -> Option<Duration>>(
        self,
        hint: H2,
    ) -> PolicyBuilder<W, K, B, J, T, S, F, C, Extras<Bu, Br, H2, R, N, V, Fb, Th, L>> {
        let mut b = self.map_extras(|x| Extras {
            budget: x.budget,
            breaker: x.breaker,
            hint,
            on_retry: x.on_retry,
            describe: x.describe,
            on_ok: x.on_ok,
            fallback: x.fallback,
            throttle: x.throttle,
            limit: x.limit,
        });
        b.checks.hinted = true;
        b
    }

    /// Called before each retry's sleep with the outcome retried (`Err(e)`, or `Ok(v)` for a
    /// value an `Ok(..)` kind matched) and a [`RetryInfo`](crate::RetryInfo): the number of
    /// the retry (1 for the first), the delay, the time since the first attempt and the rule
    /// that matched.
    pub fn on_retry<T2, E, R2: Fn(&Result<T2, E>, &crate::RetryInfo)>(
        self,
        on_retry: R2,
    ) -> PolicyBuilder<W, K, B, J, T, S, F, C, Extras<Bu, Br, H, R2, N, V, Fb, Th, L>> {
        let mut b = self.map_extras(|x| Extras {
            budget: x.budget,
            breaker: x.breaker,
            hint: x.hint,
            on_retry,
            describe: x.describe,
            on_ok: x.on_ok,
            fallback: x.fallback,
            throttle: x.throttle,
            limit: x.limit,
        });
        b.checks.on_retry = true;
        b
    }

    /// Which successful values the `on` rule retries (SPEC section 13): an `Ok(..)` kind,
    /// such as [`OkIf`](crate::kind::OkIf)`(|r: &Response| r.status() == 503)`. A matched
    /// value counts as a failed attempt for every rule, limit and guard; when the rule gives
    /// up, the last value is returned as `Ok`. Values matched by no kind are successes.
    ///
    /// Errors are still retried as [`on`](Self::on) says (every error by default): add
    /// `.on(NoError)` ([`kind::NoError`](crate::kind::NoError)) to retry only values, as the
    /// attribute's `on = [Ok(..)]` does.
    ///
    /// ```
    /// use retry_runtime::kind::OkIf;
    /// use retry_runtime::{NoBackoff, Policy};
    ///
    /// let policy = Policy::builder()
    ///     .retries(3)
    ///     .backoff(NoBackoff)
    ///     .on_ok(OkIf(|status: &u16| *status == 503))
    ///     .build()?;
    /// let mut statuses = [503, 503, 200].into_iter();
    /// let r: Result<u16, std::io::Error> = policy.call(|_| Ok(statuses.next().unwrap()));
    /// assert_eq!(r?, 200);
    ///
    /// let r: Result<u16, std::io::Error> = policy.call(|_| Ok(503));
    /// assert_eq!(r?, 503); // 3 retries, then the last value
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn on_ok<V2>(
        self,
        kind: V2,
    ) -> PolicyBuilder<W, K, B, J, T, S, F, C, Extras<Bu, Br, H, R, N, V2, Fb, Th, L>> {
        let mut b = self.map_extras(|x| Extras {
            budget: x.budget,
            breaker: x.breaker,
            hint: x.hint,
            on_retry: x.on_retry,
            describe: x.describe,
            on_ok: kind,
            fallback: x.fallback,
            throttle: x.throttle,
            limit: x.limit,
        });
        b.checks.on_plain_values = plain_value_kind::<V2>();
        b.checks.on_values = !same_type::<V2, ()>();
        b
    }

    /// What the call returns instead of an error (SPEC section 14): `fallback` is called once
    /// with the error the call would return, whatever the reason (not retried, retries used
    /// up, `max_delay`, deadline, empty budget, open breaker), and its result is returned. It
    /// is not called on success, nor when a value an `Ok(..)` kind matched is returned after
    /// the retries. (An async fallback is the attribute's; with the builder, await one on the
    /// error `call_async` returns.) Unlike the attribute, `build()` accepts a fallback beside
    /// rules that retry every error for ever: under `tower::RobustLayer` (feature `tower`)
    /// it still answers errors no rule sees (a service's readiness error, a request that
    /// cannot be copied, a per-key breaker's `Open`).
    ///
    /// ```
    /// use retry_runtime::{NoBackoff, Policy};
    ///
    /// let policy = Policy::builder()
    ///     .retries(2)
    ///     .backoff(NoBackoff)
    ///     .fallback(|_e: std::io::Error| Ok("cached"))
    ///     .build()?;
    /// let mut attempts = 0;
    /// let r = policy.call(|_| {
    ///     attempts += 1;
    ///     Err(std::io::ErrorKind::ConnectionReset.into())
    /// });
    /// assert_eq!((r?, attempts), ("cached", 3));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn fallback<T2, E, Fb2: Fn(E) -> Result<T2, E>>(
        self,
        fallback: Fb2,
    ) -> PolicyBuilder<W, K, B, J, T, S, F, C, Extras<Bu, Br, H, R, N, V, Fb2, Th, L>> {
        self.map_extras(|x| Extras {
            budget: x.budget,
            breaker: x.breaker,
            hint: x.hint,
            on_retry: x.on_retry,
            describe: x.describe,
            on_ok: x.on_ok,
            fallback,
            throttle: x.throttle,
            limit: x.limit,
        })
    }

    /// A concurrency limit (SPEC section 16): an attempt holds one of the limit's slots while
    /// it runs (not while backing off); attempts wait for a slot in FIFO order, and when the
    /// limit's queue is full the attempt fails at once with `E::from(Rejected)`, which is not
    /// retried. Async calls wait without blocking; blocking calls block their thread.
    ///
    /// ```
    /// use retry_runtime::{ConcurrencyLimit, NoBackoff, Policy};
    ///
    /// static LIMIT: ConcurrencyLimit = match ConcurrencyLimit::new(8, 100) {
    ///     Ok(l) => l,
    ///     Err(_) => panic!("invalid limit"),
    /// };
    /// let policy = Policy::builder().retries(2).backoff(NoBackoff).limit(&LIMIT).build()?;
    /// let r: std::io::Result<usize> = policy.call(|_| Ok(LIMIT.in_flight()));
    /// assert_eq!(r?, 1); // the attempt held a slot
    /// assert_eq!(LIMIT.in_flight(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn limit(
        self,
        limit: &crate::ConcurrencyLimit,
    ) -> PolicyBuilder<
        W,
        K,
        B,
        J,
        T,
        S,
        F,
        C,
        Extras<Bu, Br, H, R, N, V, Fb, Th, &crate::ConcurrencyLimit>,
    > {
        let mut b = self.map_extras(|x| Extras {
            budget: x.budget,
            breaker: x.breaker,
            hint: x.hint,
            on_retry: x.on_retry,
            describe: x.describe,
            on_ok: x.on_ok,
            fallback: x.fallback,
            throttle: x.throttle,
            limit,
        });
        b.checks.limit_of_one = limit.max_in_flight() == 1;
        b
    }

    /// Client-side throttling (SPEC section 16, the SRE book's adaptive throttling): before
    /// each attempt the call is rejected locally with the throttle's probability,
    /// max(0, (requests - k * accepts) / (requests + 1)) over its window, where an attempt is
    /// accepted unless it failed with a retryable error: one a rule matches, whatever that
    /// rule's retries (a [`when`](Self::when) rule with `retries(0)` included). An error no
    /// rule matches is the service's answer, accepted. A rejected first attempt fails with
    /// `E::from(Rejected)`; a rejected retry is not made and the last failure is returned.
    ///
    /// ```
    /// use std::time::Duration;
    /// use retry_runtime::{AdaptiveThrottle, NoBackoff, Policy};
    ///
    /// static THROTTLE: AdaptiveThrottle = match AdaptiveThrottle::new(2.0, Duration::from_secs(60)) {
    ///     Ok(t) => t,
    ///     Err(_) => panic!("invalid throttle"),
    /// };
    /// let policy = Policy::builder().retries(2).backoff(NoBackoff).throttle(&THROTTLE).build()?;
    /// let r: std::io::Result<u32> = policy.call(|_| Ok(1));
    /// assert_eq!(r?, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn throttle(
        self,
        throttle: &crate::AdaptiveThrottle,
    ) -> PolicyBuilder<
        W,
        K,
        B,
        J,
        T,
        S,
        F,
        C,
        Extras<Bu, Br, H, R, N, V, Fb, &crate::AdaptiveThrottle, L>,
    > {
        self.map_extras(|x| Extras {
            budget: x.budget,
            breaker: x.breaker,
            hint: x.hint,
            on_retry: x.on_retry,
            describe: x.describe,
            on_ok: x.on_ok,
            fallback: x.fallback,
            throttle,
            limit: x.limit,
        })
    }

    /// Names the function this policy retries, for its tracing events (feature `tracing`):
    /// each event then carries `function = "<name>"`. Without the feature the name is not
    /// kept and costs nothing. (`#[robust]` names its fn by itself.)
    ///
    /// ```
    /// use retry_runtime::{NoBackoff, Policy};
    ///
    /// let policy = Policy::builder().name("fetch").retries(1).backoff(NoBackoff).build()?;
    /// // Events: "attempt failed, retrying" with function = "fetch", retry = 1, then
    /// // "giving up: returning the last error" with function = "fetch", retries = 1.
    /// let r: std::io::Result<()> = policy.call(|_| Err(std::io::ErrorKind::Other.into()));
    /// assert!(r.is_err());
    /// # Ok::<(), retry_runtime::ConfigError>(())
    /// ```
    pub fn name(
        self,
        name: &'static str,
    ) -> PolicyBuilder<
        W,
        K,
        B,
        J,
        T,
        S,
        F,
        C,
        Extras<Bu, Br, H, R, crate::callbacks::Name, V, Fb, Th, L>,
    > {
        self.map_extras(|x| Extras {
            budget: x.budget,
            breaker: x.breaker,
            hint: x.hint,
            on_retry: x.on_retry,
            describe: crate::callbacks::Name::new(name),
            on_ok: x.on_ok,
            fallback: x.fallback,
            throttle: x.throttle,
            limit: x.limit,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kinds that never ask for a delay of their own are recognised through references and
    /// `Or`s, whatever their closures' names hold; a hint anywhere in an `Or`, or a kind of the
    /// user's, is not.
    #[test]
    fn plain_value_kinds_are_recognised_through_references_and_ors() {
        use crate::kind::{OkHinted, OkIf, Or};
        fn kind_of<K>(_: &K) -> bool {
            plain_value_kind::<K>()
        }
        fn generic<T: PartialEq + Default>() -> OkIf<impl Fn(&T) -> bool> {
            OkIf(|v: &T| *v == T::default())
        }
        let busy = OkIf(|v: &(u16, u8)| v.0 == 503);
        let also = generic::<(u16, u8)>();
        let hinted: OkHinted<_, _> =
            OkIf(|v: &(u16, u8)| v.0 == 429).hint(|_: &(u16, u8)| None::<Duration>);
        struct Mine;
        assert!(kind_of(&busy));
        assert!(kind_of(&&busy));
        assert!(kind_of(&Or(busy, &also)));
        assert!(kind_of(&Or(Or(&busy, also), busy)));
        assert!(!kind_of(&hinted));
        assert!(!kind_of(&&hinted));
        assert!(!kind_of(&Or(busy, &hinted)));
        assert!(!kind_of(&Or(&hinted, busy)));
        assert!(!kind_of(&Mine));
        assert!(!kind_of(&Or(busy, Mine)));
        assert!(!kind_of(&()));
    }

    #[test]
    fn build_reports_the_first_error() {
        let e = Policy::builder().scale(0.0).build().unwrap_err();
        assert_eq!(e.parameter(), "scale");
        let e = Policy::builder()
            .timeout(Duration::ZERO)
            .build()
            .unwrap_err();
        assert_eq!(e.parameter(), "timeout");
        let e = Policy::builder()
            .timeout_secs(f64::NAN)
            .build()
            .unwrap_err();
        assert_eq!(e.parameter(), "timeout");
        let e = Policy::builder()
            .when(AnyError, |s| s.scale(-2.0))
            .build()
            .unwrap_err();
        assert_eq!(e.parameter(), "scale");
        let e = Policy::builder()
            .when_ok(crate::kind::OkIf(|v: &u32| *v == 503), |s| {
                s.max_delay_secs(f64::NAN)
            })
            .build()
            .err()
            .unwrap();
        assert_eq!(e.parameter(), "max_delay");
        // The first one, whichever part it was given to.
        let e = Policy::builder()
            .scale(-2.0)
            .timeout(Duration::ZERO)
            .build()
            .unwrap_err();
        assert_eq!(e.parameter(), "scale");
        let e = Policy::builder()
            .timeout(Duration::ZERO)
            .when(AnyError, |s| s.scale(-2.0))
            .when_ok(crate::kind::OkIf(|v: &u32| *v == 503), |s| {
                s.max_delay_secs(f64::NAN)
            })
            .on_success(|| {})
            .build()
            .err()
            .unwrap();
        assert_eq!(e.parameter(), "timeout");
        assert_eq!(
            Policy::builder()
                .timeout_secs(-1.0)
                .build()
                .unwrap()
                .timeout,
            PerAttempt(None)
        );
    }
}
