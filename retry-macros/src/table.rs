//! The grammar's vocabulary in one place: the keys, the strategies with their parameters, the
//! jitters and the kinds. Parsing, checks and messages read these tables, so "expected one
//! of" and "did you mean" never drift from what is accepted.

/// How the value of a key is read.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Syntax {
    /// A number, string, name, call or list of numbers.
    Value,
    /// A Rust expression (a callback, a `static`).
    Expr,
    /// A list of error kinds, `[Timeout, Io]`.
    Kinds,
    /// `when(KIND, key = value, ...)`.
    When,
    /// `hedge(param = value, ...)`: a key written as a call.
    Call,
}

/// A key of the attribute.
pub struct Key {
    pub name: &'static str,
    /// May be overridden in a `when(...)` clause.
    pub in_when: bool,
    pub syntax: Syntax,
}

const fn key(name: &'static str, in_when: bool, syntax: Syntax) -> Key {
    Key {
        name,
        in_when,
        syntax,
    }
}

pub const KEYS: &[Key] = &[
    key("timeout", false, Syntax::Value),
    key("deadline", false, Syntax::Value),
    key("retries", true, Syntax::Value),
    key("max_delay", true, Syntax::Value),
    key("backoff", true, Syntax::Value),
    key("jitter", true, Syntax::Value),
    key("scale", true, Syntax::Value),
    key("on", false, Syntax::Kinds),
    key("when", false, Syntax::When),
    key("on_success", false, Syntax::Expr),
    key("on_error", false, Syntax::Expr),
    key("on_retry", false, Syntax::Expr),
    key("hint", false, Syntax::Expr),
    key("fallback", false, Syntax::Expr),
    key("budget", false, Syntax::Expr),
    key("breaker", false, Syntax::Expr),
    key("throttle", false, Syntax::Expr),
    key("limit", false, Syntax::Expr),
    key("hedge", false, Syntax::Call),
    key("attempt", false, Syntax::Value),
    key("crate", false, Syntax::Value),
];

/// How `name`'s value is read; unknown keys read as plain values (and are reported later).
pub fn syntax(name: &str) -> Syntax {
    KEYS.iter()
        .find(|k| k.name == name)
        .map_or(Syntax::Value, |k| k.syntax)
}

/// A parameter of a strategy: required when it has no default.
pub struct Param {
    pub name: &'static str,
    /// The default, as the signature writes it (`"2"`, `"base"`).
    pub default: Option<&'static str>,
    /// A value to show in examples.
    pub example: &'static str,
}

const fn required(name: &'static str, example: &'static str) -> Param {
    Param {
        name,
        default: None,
        example,
    }
}

const fn optional(name: &'static str, default: &'static str) -> Param {
    Param {
        name,
        default: Some(default),
        example: default,
    }
}

/// A backoff strategy and its parameters.
pub struct Strategy {
    pub name: &'static str,
    pub params: &'static [Param],
}

impl Strategy {
    /// `exponential(base, max, m = 2)`.
    pub fn signature(&self) -> String {
        match self.name {
            "none" => "none".into(),
            "custom" => "custom(EXPR)".into(),
            name => {
                let params: Vec<String> = self
                    .params
                    .iter()
                    .map(|p| match p.default {
                        Some(d) => format!("{} = {d}", p.name),
                        None => p.name.to_owned(),
                    })
                    .collect();
                format!("{name}({})", params.join(", "))
            }
        }
    }

    /// `exponential(base = "100ms", max = "20s")`: the required parameters, with values.
    pub fn example(&self) -> String {
        let params: Vec<String> = self
            .params
            .iter()
            .filter(|p| p.default.is_none())
            .map(|p| format!("{} = {}", p.name, p.example))
            .collect();
        format!("{}({})", self.name, params.join(", "))
    }

    pub fn param_names(&self) -> impl Iterator<Item = &'static str> + Clone {
        self.params.iter().map(|p| p.name)
    }
}

const BASE: Param = required("base", "\"100ms\"");
const MAX: Param = required("max", "\"20s\"");

/// `hedge(after, max = 1)` (SPEC section 15), read as a strategy's parameters are.
pub const HEDGE: Strategy = Strategy {
    name: "hedge",
    params: &[required("after", "\"50ms\""), optional("max", "1")],
};

/// `timeout = adaptive(p, factor = 1, min, max)` (SPEC section 15b).
pub const ADAPTIVE: Strategy = Strategy {
    name: "adaptive",
    params: &[
        required("p", "99.9"),
        optional("factor", "1"),
        required("min", "\"50ms\""),
        required("max", "\"5s\""),
    ],
};

pub const STRATEGIES: &[Strategy] = &[
    Strategy {
        name: "exponential",
        params: &[BASE, MAX, optional("m", "2")],
    },
    Strategy {
        name: "linear",
        params: &[BASE, MAX, optional("interval", "base")],
    },
    Strategy {
        name: "fibonacci",
        params: &[BASE, MAX, optional("unit", "\"1s\"")],
    },
    Strategy {
        name: "polynomial",
        params: &[BASE, MAX, optional("p", "[2]"), optional("unit", "\"1s\"")],
    },
    Strategy {
        name: "random",
        params: &[BASE, MAX],
    },
    Strategy {
        name: "constant",
        params: &[required("base", "\"200ms\"")],
    },
    Strategy {
        name: "none",
        params: &[],
    },
    Strategy {
        name: "custom",
        params: &[],
    },
];

pub const JITTERS: &[&str] = &[
    "none",
    "full",
    "equal",
    "decorrelated",
    "aws_decorrelated",
    "custom",
];

/// The stable `std::io::ErrorKind` variants.
pub const IO_KINDS: &[&str] = &[
    "NotFound",
    "PermissionDenied",
    "ConnectionRefused",
    "ConnectionReset",
    "HostUnreachable",
    "NetworkUnreachable",
    "ConnectionAborted",
    "NotConnected",
    "AddrInUse",
    "AddrNotAvailable",
    "NetworkDown",
    "BrokenPipe",
    "AlreadyExists",
    "WouldBlock",
    "NotADirectory",
    "IsADirectory",
    "DirectoryNotEmpty",
    "ReadOnlyFilesystem",
    "StaleNetworkFileHandle",
    "InvalidInput",
    "InvalidData",
    "TimedOut",
    "WriteZero",
    "StorageFull",
    "NotSeekable",
    "QuotaExceeded",
    "FileTooLarge",
    "ResourceBusy",
    "ExecutableFileBusy",
    "Deadlock",
    "CrossesDevices",
    "TooManyLinks",
    "InvalidFilename",
    "ArgumentListTooLong",
    "Interrupted",
    "Unsupported",
    "UnexpectedEof",
    "OutOfMemory",
    "Other",
];

/// The built-in error kinds, for "did you mean".
pub const KINDS: &[&str] = &["Timeout", "Io"];

/// "`a`, `b`, `c`".
pub fn list<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    names
        .into_iter()
        .map(|n| match n {
            "when" => "`when(...)`".to_owned(),
            "hedge" => "`hedge(...)`".to_owned(),
            "custom" => "`custom(EXPR)`".to_owned(),
            n => format!("`{n}`"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn key_names(in_when: bool) -> impl Iterator<Item = &'static str> {
    KEYS.iter()
        .filter(move |k| k.in_when || !in_when)
        .map(|k| k.name)
}

pub fn strategy_forms() -> String {
    STRATEGIES
        .iter()
        .map(|s| format!("`{}`", s.signature()))
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn strategy(name: &str) -> Option<&'static Strategy> {
    STRATEGIES.iter().find(|s| s.name == name)
}

/// The candidate `word` is most likely a misspelling of, if any: same letters in another
/// case, or an edit distance of at most one (two for words of five letters or more).
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let lower = word.to_lowercase();
    candidates
        .into_iter()
        .filter(|c| *c != word)
        .map(|c| {
            let d = if c.to_lowercase() == lower {
                0
            } else {
                strsim::damerau_levenshtein(&lower, &c.to_lowercase())
            };
            (d, c)
        })
        .filter(|(d, c)| *d <= if c.len() >= 5 { 2 } else { 1 })
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// " (did you mean `x`?)", or nothing.
pub fn suggestion<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    did_you_mean(word, candidates)
        .map(|c| format!(" (did you mean `{c}`?)"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_misses() {
        assert_eq!(did_you_mean("retrys", key_names(false)), Some("retries"));
        assert_eq!(did_you_mean("timout", key_names(false)), Some("timeout"));
        assert_eq!(
            did_you_mean("Tiemout", KINDS.iter().copied()),
            Some("Timeout")
        );
        assert_eq!(
            did_you_mean("timeout", KINDS.iter().copied()),
            Some("Timeout")
        );
        assert_eq!(did_you_mean("io", KINDS.iter().copied()), Some("Io"));
        assert_eq!(did_you_mean("IO", KINDS.iter().copied()), Some("Io"));
        assert_eq!(did_you_mean("ServerBusy", KINDS.iter().copied()), None);
        assert_eq!(did_you_mean("Ok", KINDS.iter().copied()), None);
        assert_eq!(did_you_mean("frobnicate", key_names(false)), None);
    }
}
