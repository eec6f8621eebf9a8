//! Where a fleet's guards meet: Redis, through two Lua scripts (one atomic update per key and
//! round, all the keys of a round in one pipeline), or [`MemoryStore`], the same rules in this
//! process (for tests, simulations and a machine without Redis).
//!
//! Both apply the same rules; the scripts below are their reference, and the memory store
//! follows them line by line (`the_scripts_and_the_memory_store_agree` runs both on the same
//! times and pushes).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The number of slots a breaker's window is cut into (each `window / 10` long).
pub(crate) const SLOTS: u64 = 10;

/// The breaker's state as stored: closed, open, half-open.
pub(crate) const CLOSED: u8 = 0;
pub(crate) const OPEN: u8 = 1;
pub(crate) const HALF_OPEN: u8 = 2;

/// A breaker's settings, sent with every sync (so that every instance applies the same).
#[derive(Debug, Clone, Copy)]
pub(crate) struct BreakerConf {
    pub window_ms: u64,
    pub min_calls: u64,
    pub ratio: f64,
    pub break_ms: u64,
    pub probes: u64,
    pub ttl_ms: u64,
}

/// What one instance pushes to a breaker's key: its outcomes since the last sync.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct BreakerPush {
    /// Attempts (and failures among them) recorded while the fleet's breaker was closed.
    pub attempts: u64,
    pub failures: u64,
    /// The half-open round the probe outcomes belong to, and those outcomes.
    pub round: u64,
    pub probe_ok: u64,
    pub probe_fail: u64,
    /// Probes this instance asks for (0 or 1), when the breaker is half-open.
    pub want: u64,
    /// Whether a probe granted to this instance in `round` is still unused here (0 or 1): a
    /// later round grants it again, beside its own, instead of voiding it.
    pub held: u64,
    /// What is left (ms) of the break this instance holds from the fleet's last answer (1
    /// when that answer was half-open, or open with its break over, and its local breaker
    /// has not closed since), 0 without one: a key made anew (lost during the break or the
    /// half-open round) starts open for it.
    pub hold_ms: u64,
}

/// What the key answers: the fleet's state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct BreakerReply {
    pub state: u8,
    /// While open: how long the break still lasts.
    pub remaining_ms: u64,
    pub round: u64,
    /// Probes granted to this instance.
    pub grant: u64,
    /// The fleet's attempts and failures in the window (closed state).
    pub attempts: u64,
    pub failures: u64,
}

/// A budget's settings and one instance's push: its earnings since the last sync and the
/// tokens it asks for its lease.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BudgetPush {
    pub capacity: u64,
    pub earned: u64,
    pub want: u64,
    pub ttl_ms: u64,
    /// The cost of one retry: a lease is granted in whole retries (a fraction of one, held by
    /// an instance, could pay for nothing).
    pub cost: u64,
}

/// What a budget's key answers (in thousandths of a token).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct BudgetReply {
    pub grant: u64,
    pub tokens: u64,
}

/// The breaker's script. KEYS[1]: the key; ARGV: window_ms, min_calls, failure_ratio,
/// break_ms, probes, ttl_ms, attempts, failures, round, probe_ok, probe_fail, want, held,
/// hold_ms.
/// Returns {state, remaining_ms, round, grant, window_attempts, window_failures}.
pub(crate) const BREAKER_SCRIPT: &str = r#"
local key = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window_ms = tonumber(ARGV[1])
local min_calls = tonumber(ARGV[2])
local ratio = tonumber(ARGV[3])
local break_ms = tonumber(ARGV[4])
local probes = tonumber(ARGV[5])
local ttl_ms = tonumber(ARGV[6])
local attempts = tonumber(ARGV[7])
local failures = tonumber(ARGV[8])
local round_in = tonumber(ARGV[9])
local pok_in = tonumber(ARGV[10])
local pfail_in = tonumber(ARGV[11])
local want = tonumber(ARGV[12])
local held = tonumber(ARGV[13])
local hold = tonumber(ARGV[14])
local SLOTS = 10
local h = {}
local raw = redis.call('HGETALL', key)
for i = 1, #raw, 2 do h[raw[i]] = tonumber(raw[i + 1]) end
local function get(f) return h[f] or 0 end
local state, untl, round = get('state'), get('until'), get('round')
-- A new key (first use, or lost: expired, or Redis restarted without it) numbers its rounds
-- from the clock, so that a probe granted for a round of the key it replaces never matches one
-- of its own.
if #raw == 0 then round = now % 1073741824 end
-- A key made anew while the instance syncing it holds a break the fleet announced (the key was
-- lost during the break: evicted, or Redis restarted without it) starts open for what is left
-- of it, at most a break: losing the key during a break does not end the break. (An instance
-- that last saw the fleet half-open sends 1 ms: the next round makes the key half-open again.)
if #raw == 0 and hold > 0 then state = 1; untl = now + math.min(hold, break_ms) end
local left, pok, pfail, since = get('left'), get('pok'), get('pfail'), get('since')
local slot_ms = math.max(1, math.floor(window_ms / SLOTS))
local epoch = math.floor(now / slot_ms)
local function clear()
  for i = 0, SLOTS - 1 do h['e' .. i] = 0; h['a' .. i] = 0; h['f' .. i] = 0 end
end
local function open()
  state = 1; untl = now + break_ms; clear()
end
local function new_round()
  state = 2; round = round + 1; left = probes; pok = 0; pfail = 0; since = now
end
if state == 1 and now >= untl then new_round() end
if state == 2 then
  if round_in == round then pok = pok + pok_in; pfail = pfail + pfail_in end
  if pok + pfail >= probes then
    if pfail >= ratio * probes then open() else state = 0; clear() end
  -- (`since`: when the round granted its last probe, or began: a probe granted late in a
  -- long round is not voided by the next sync.)
  elseif left <= 0 and now - since >= break_ms then
    new_round()
  end
end
local sum_a, sum_f = 0, 0
if state == 0 then
  local i = epoch % SLOTS
  if get('e' .. i) ~= epoch then h['e' .. i] = epoch; h['a' .. i] = 0; h['f' .. i] = 0 end
  h['a' .. i] = get('a' .. i) + attempts
  h['f' .. i] = get('f' .. i) + failures
  for j = 0, SLOTS - 1 do
    local e = get('e' .. j)
    if e > epoch - SLOTS and e <= epoch then
      sum_a = sum_a + get('a' .. j); sum_f = sum_f + get('f' .. j)
    end
  end
  if sum_a >= min_calls and sum_f >= ratio * sum_a then open() end
end
-- Probes granted in an earlier round and not used yet (their instance has not called since)
-- are granted again, beside the round's own (which go to the instances that ask): a round
-- restarted before the holder's next call would otherwise void its probe every time, and the
-- breaker of a fleet whose instances call less often than the break would never close; and
-- one that kept them from the others would let an instance that holds one and no longer calls
-- keep the fleet half-open. Only the round's first `probes` answers decide it.
local grant = 0
if state == 2 and held > 0 and round_in ~= round then grant = held end
if state == 2 and want > 0 and left > 0 then
  local fresh = math.min(want, left); left = left - fresh; grant = grant + fresh; since = now
end
local remaining = 0
if state == 1 then remaining = untl - now end
local function int(x) return string.format('%d', x) end
local out = {'state', int(state), 'until', int(untl), 'round', int(round), 'left', int(left),
  'pok', int(pok), 'pfail', int(pfail), 'since', int(since)}
for i = 0, SLOTS - 1 do
  for _, p in ipairs({'e', 'a', 'f'}) do
    out[#out + 1] = p .. i; out[#out + 1] = int(get(p .. i))
  end
end
redis.call('HSET', key, unpack(out))
redis.call('PEXPIRE', key, ttl_ms)
return {state, remaining, round, grant, sum_a, sum_f}
"#;

/// The budget's script. KEYS[1]: the key; ARGV: capacity, earned, want, ttl_ms, cost (amounts
/// in thousandths of a token). A missing key is a full bucket. The grant is a whole number of
/// retries' costs. Returns {grant, tokens}.
pub(crate) const BUDGET_SCRIPT: &str = r#"
local key = KEYS[1]
local cap = tonumber(ARGV[1])
local earned = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local ttl_ms = tonumber(ARGV[4])
local cost = tonumber(ARGV[5])
local t = tonumber(redis.call('HGET', key, 'tokens'))
if t == nil then t = cap end
t = math.min(cap, t + earned)
local g = math.min(want, t)
if cost > 0 then g = math.floor(g / cost) * cost end
t = t - g
redis.call('HSET', key, 'tokens', string.format('%d', t))
redis.call('PEXPIRE', key, ttl_ms)
return {g, t}
"#;

/// One breaker's part of a round: its key, settings and push.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BreakerSync<'a> {
    pub key: &'a str,
    pub conf: &'a BreakerConf,
    pub push: BreakerPush,
}

/// One budget's part of a round: its key and push.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BudgetSync<'a> {
    pub key: &'a str,
    pub push: BudgetPush,
}

/// What a round answers: one result per key, in the order given. An error of one key (a key of
/// the wrong type, a script error) is that key's alone.
#[derive(Debug, Default)]
pub(crate) struct RoundReply {
    pub breakers: Vec<Result<BreakerReply, String>>,
    pub budgets: Vec<Result<BudgetReply, String>>,
}

/// One place where guards meet. Errors are strings: they are only reported.
pub(crate) trait Backend: Send {
    /// One round: every key's update in one exchange (with Redis, one pipeline: one round
    /// trip). `Err`: the round failed as a whole (no connection, a timeout), and nothing it
    /// pushed is known to have been applied.
    fn round(
        &mut self,
        breakers: &[BreakerSync<'_>],
        budgets: &[BudgetSync<'_>],
        now: Instant,
    ) -> Result<RoundReply, String>;
}

/// Redis through the two scripts, on a blocking connection with timeouts.
pub(crate) struct RedisBackend {
    client: redis::Client,
    con: Option<redis::Connection>,
    /// Whether this connection has loaded the scripts (`SCRIPT LOAD`, sent at the head of the
    /// first pipeline of each connection, and again after a `NOSCRIPT`).
    loaded: bool,
    timeout: Duration,
    breaker: redis::Script,
    budget: redis::Script,
}

impl RedisBackend {
    pub(crate) fn new(client: redis::Client, timeout: Duration) -> Self {
        Self {
            client,
            con: None,
            loaded: false,
            timeout,
            breaker: redis::Script::new(BREAKER_SCRIPT),
            budget: redis::Script::new(BUDGET_SCRIPT),
        }
    }

    fn connect(&mut self) -> Result<&mut redis::Connection, String> {
        if self.con.is_none() {
            let con = self
                .client
                .get_connection_with_timeout(self.timeout)
                .map_err(|e| e.to_string())?;
            con.set_read_timeout(Some(self.timeout))
                .map_err(|e| e.to_string())?;
            con.set_write_timeout(Some(self.timeout))
                .map_err(|e| e.to_string())?;
            self.loaded = false;
            self.con = Some(con);
        }
        self.con.as_mut().ok_or_else(|| "not connected".to_owned())
    }
}

/// The breaker's script run for one key: its KEYS and ARGV in the script's order.
fn breaker_invocation<'s>(
    script: &'s redis::Script,
    b: &BreakerSync<'_>,
) -> redis::ScriptInvocation<'s> {
    let (c, p) = (b.conf, &b.push);
    let mut run = script.key(b.key);
    run.arg(c.window_ms)
        .arg(c.min_calls)
        .arg(c.ratio)
        .arg(c.break_ms)
        .arg(c.probes)
        .arg(c.ttl_ms)
        .arg(p.attempts)
        .arg(p.failures)
        .arg(p.round)
        .arg(p.probe_ok)
        .arg(p.probe_fail)
        .arg(p.want)
        .arg(p.held)
        .arg(p.hold_ms);
    run
}

/// The budget's script run for one key: its KEYS and ARGV in the script's order.
fn budget_invocation<'s>(
    script: &'s redis::Script,
    b: &BudgetSync<'_>,
) -> redis::ScriptInvocation<'s> {
    let p = &b.push;
    let mut run = script.key(b.key);
    run.arg(p.capacity)
        .arg(p.earned)
        .arg(p.want)
        .arg(p.ttl_ms)
        .arg(p.cost);
    run
}

fn at(v: &[i64], i: usize) -> u64 {
    v.get(i).map_or(0, |&x| u64::try_from(x).unwrap_or(0))
}

/// One script's reply: its numbers, or the key's error.
fn reply(v: Option<redis::Value>) -> Result<Vec<i64>, String> {
    match v {
        Some(redis::Value::ServerError(e)) => Err(e.to_string()),
        Some(v) => redis::from_redis_value::<Vec<i64>>(v).map_err(|e| e.to_string()),
        None => Err("no reply".to_owned()),
    }
}

fn is_noscript(v: &redis::Value) -> bool {
    matches!(v, redis::Value::ServerError(e) if e.kind() == Some(redis::ServerErrorKind::NoScript))
}

/// The error of a server that refuses every script whatever its key (a replica after a
/// failover left this connection on it, memory full under `noeviction`, a failed snapshot, a
/// dump being loaded, a busy script): the round fails when every key meets one (nothing was
/// applied), as for a lost connection, and the next one reconnects (to the new primary, after
/// a failover). A key's own error (`WRONGTYPE`, an ACL's `NOPERM` for some keys) fails that
/// key alone. Redis before 7 wraps the error of a `redis.call` in the script in its own
/// (`ERR Error running script ...: -READONLY ...`): the code is read there too.
fn server_wide(v: &redis::Value) -> Option<String> {
    const CODES: &[&str] = &[
        "READONLY",
        "MASTERDOWN",
        "LOADING",
        "OOM",
        "MISCONF",
        "BUSY",
        "CLUSTERDOWN",
    ];
    let redis::Value::ServerError(e) = v else {
        return None;
    };
    let text = e.to_string();
    let wrapped = |code: &str| e.code() == "ERR" && text.contains(&format!("-{code} "));
    CODES
        .iter()
        .any(|&code| e.code() == code || wrapped(code))
        .then_some(text)
}

impl RedisBackend {
    /// One pipeline: the scripts of the keys `todo` (indices into the breakers, then the
    /// budgets), headed by `SCRIPT LOAD` of both scripts if this connection has not loaded
    /// them; their replies, in the order of `todo`.
    fn send(
        &mut self,
        breakers: &[BreakerSync<'_>],
        budgets: &[BudgetSync<'_>],
        todo: &[usize],
    ) -> Result<Vec<redis::Value>, String> {
        // Connected first: a new connection has loaded no script (its first pipeline loads
        // them, not a second one after `NOSCRIPT`).
        self.connect()?;
        let loading = !self.loaded;
        let mut pipe = redis::pipe();
        if loading {
            pipe.load_script(&self.breaker).ignore();
            pipe.load_script(&self.budget).ignore();
        } else if todo.is_empty() {
            // No guard yet: the round still checks that Redis answers.
            pipe.cmd("PING").ignore();
        }
        for &i in todo {
            if let Some(b) = breakers.get(i) {
                pipe.invoke_script(&breaker_invocation(&self.breaker, b));
            } else if let Some(b) = budgets.get(i - breakers.len()) {
                pipe.invoke_script(&budget_invocation(&self.budget, b));
            }
        }
        // The replies of the commands at the head (`SCRIPT LOAD`, `PING`), not returned.
        let head = if loading {
            2
        } else {
            usize::from(todo.is_empty())
        };
        let con = self.connect()?;
        match exchange(con, &pipe.get_packed_pipeline(), head, todo.len()) {
            // (The ignored commands, `SCRIPT LOAD` and `PING`, have no reply here.)
            Ok(v) if !v.is_empty() && v.iter().all(|v| server_wide(v).is_some()) => {
                let e = v.iter().find_map(server_wide).unwrap_or_default();
                self.con = None;
                Err(format!("the server refuses every key: {e}"))
            }
            Ok(v) => {
                self.loaded = true;
                Ok(v)
            }
            Err(e) => {
                // An error of the connection (a timeout, a reset): the next round reconnects.
                self.con = None;
                Err(e.to_string())
            }
        }
    }
}

/// Sends a packed pipeline and reads its replies (`head` of them dropped, then `count`
/// returned; push messages skipped), stopping at the first error of the connection.
/// redis-rs's own `query` would read on after a timeout, waiting the timeout again for each
/// reply still due: a frozen server would hold a round of many keys for many timeouts (and
/// the fleet's fall-back with it), where this one gives up after one. (A server's error for one command is that command's
/// reply, not an error here.)
fn exchange(
    con: &mut redis::Connection,
    packed: &[u8],
    head: usize,
    count: usize,
) -> redis::RedisResult<Vec<redis::Value>> {
    con.send_packed_command(packed)?;
    for _ in 0..head {
        reply_to(con)?;
    }
    (0..count).map(|_| reply_to(con)).collect()
}

/// The next reply on `con`, past any RESP3 push message (a client-tracking invalidation sent
/// to this connection, say), which answers no command: counted as a reply, it would shift
/// every reply after it onto the next key.
fn reply_to(con: &mut redis::Connection) -> redis::RedisResult<redis::Value> {
    loop {
        match con.recv_response()? {
            redis::Value::Push { .. } => {}
            v => return Ok(v),
        }
    }
}

impl Backend for RedisBackend {
    fn round(
        &mut self,
        breakers: &[BreakerSync<'_>],
        budgets: &[BudgetSync<'_>],
        _: Instant,
    ) -> Result<RoundReply, String> {
        let n = breakers.len() + budgets.len();
        let mut replies: Vec<Option<redis::Value>> = vec![None; n];
        let mut todo: Vec<usize> = (0..n).collect();
        // A second pipeline only if the server lost the scripts since this connection loaded
        // them (`SCRIPT FLUSH`, a failover): the keys that met `NOSCRIPT`, with the scripts
        // loaded again at its head. Their scripts did not run, so nothing counts twice.
        for _ in 0..2 {
            let loaded = self.loaded;
            let values = self.send(breakers, budgets, &todo)?;
            let mut again = Vec::new();
            for (&i, v) in todo.iter().zip(values) {
                if loaded && is_noscript(&v) {
                    again.push(i);
                }
                if let Some(r) = replies.get_mut(i) {
                    *r = Some(v);
                }
            }
            if again.is_empty() {
                break;
            }
            self.loaded = false;
            todo = again;
        }
        let mut replies = replies.into_iter();
        // A state this version does not know (a hash written by hand, or by another version)
        // is the key's error: its guard decides locally. No grant exceeds what was asked.
        let breakers = breakers
            .iter()
            .map(|b| {
                reply(replies.next().flatten()).and_then(|v| {
                    let state = at(&v, 0);
                    let state = u8::try_from(state)
                        .ok()
                        .filter(|s| [CLOSED, HALF_OPEN, OPEN].contains(s))
                        .ok_or_else(|| format!("unknown breaker state {state} in Redis"))?;
                    Ok(BreakerReply {
                        state,
                        remaining_ms: at(&v, 1),
                        round: at(&v, 2),
                        // (A probe held from an earlier round is asked for again.)
                        grant: at(&v, 3).min(b.push.want.max(b.push.held)),
                        attempts: at(&v, 4),
                        failures: at(&v, 5),
                    })
                })
            })
            .collect();
        let budgets = budgets
            .iter()
            .map(|b| {
                reply(replies.next().flatten()).map(|v| BudgetReply {
                    grant: at(&v, 0).min(b.push.want),
                    tokens: at(&v, 1),
                })
            })
            .collect();
        Ok(RoundReply { breakers, budgets })
    }
}

/// A breaker's record in the memory store (the fields of the Redis hash).
#[derive(Debug, Clone, Default)]
struct BreakerRecord {
    state: u8,
    until: u64,
    round: u64,
    left: u64,
    pok: u64,
    pfail: u64,
    /// When the half-open round granted its last probe, or began.
    since: u64,
    /// Per slot: epoch, attempts, failures.
    slots: [(u64, u64, u64); SLOTS as usize],
}

#[derive(Debug, Clone)]
enum Record {
    Breaker(Box<BreakerRecord>),
    Budget(u64),
}

#[derive(Debug)]
struct Memory {
    /// The store's time origin: the first instant a round or a query gives it (so that a
    /// store synced on a virtual clock counts that clock's time, whenever it was made).
    epoch: Option<Instant>,
    /// Key: (record, expiry in ms since `epoch`).
    keys: HashMap<String, (Record, u64)>,
    down: bool,
    /// Keys whose every sync fails (as a key of the wrong type in Redis).
    broken: Vec<String>,
}

/// The fleet's shared state kept in this process, with the rules of the Redis scripts: what
/// [`Fleet::in_memory`](super::Fleet::in_memory), [`Fleet::manual`](super::Fleet::manual) and
/// [`Fleet::manual_on`](super::Fleet::manual_on) use where no Redis runs (tests, simulations, a laptop). Clones share the store.
#[derive(Debug, Clone)]
pub struct MemoryStore {
    inner: Arc<Mutex<Memory>>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// An empty store; its clock starts at the first instant a sync (or [`keys`](Self::keys))
    /// gives it.
    pub fn new() -> Self {
        Self {
            inner: Arc::new(Mutex::new(Memory {
                epoch: None,
                keys: HashMap::new(),
                down: false,
                broken: Vec::new(),
            })),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Memory> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes the store unreachable (every sync fails) or reachable again: an outage, in a test.
    pub fn set_down(&self, down: bool) {
        self.lock().down = down;
    }

    /// Makes every sync of `key` fail (as a key of the wrong type does in Redis) or work
    /// again: one bad key, in a test. The other keys are not affected.
    pub fn set_broken(&self, key: &str, broken: bool) {
        let mut m = self.lock();
        m.broken.retain(|k| k != key);
        if broken {
            m.broken.push(key.to_owned());
        }
    }

    /// How many handles share the store (a fleet's sync thread holds one until it ends).
    #[cfg(test)]
    pub(crate) fn handles(&self) -> usize {
        Arc::strong_count(&self.inner)
    }

    /// Loses `key` (as an eviction or a restart without persistence does), in a test.
    #[cfg(test)]
    pub(crate) fn lose(&self, key: &str) {
        self.lock().keys.remove(key);
    }

    /// The keys held, expired or not.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.lock().keys.len()
    }

    /// The keys alive at `now`.
    pub fn keys(&self, now: Instant) -> Vec<String> {
        let mut m = self.lock();
        let t = m.ms(now);
        let mut k: Vec<String> = m
            .keys
            .iter()
            .filter(|(_, (_, exp))| *exp > t)
            .map(|(k, _)| k.clone())
            .collect();
        k.sort();
        k
    }
}

pub(crate) fn ms(epoch: Instant, t: Instant) -> u64 {
    u64::try_from(t.saturating_duration_since(epoch).as_millis()).unwrap_or(u64::MAX)
}

impl Memory {
    /// `now` in ms since the store's epoch (`now` itself, the first time).
    fn ms(&mut self, now: Instant) -> u64 {
        ms(*self.epoch.get_or_insert(now), now)
    }

    fn check(&self) -> Result<(), String> {
        if self.down {
            Err("memory store: down".to_owned())
        } else {
            Ok(())
        }
    }

    /// The live record of `key` at `now` (an expired one is gone).
    fn take(&mut self, key: &str, now: u64) -> Option<Record> {
        match self.keys.remove(key) {
            Some((r, exp)) if exp > now => Some(r),
            _ => None,
        }
    }
}

pub(crate) struct MemoryBackend(pub(crate) MemoryStore);

impl Memory {
    fn key_ok(&self, key: &str) -> Result<(), String> {
        if self.broken.iter().any(|k| k == key) {
            Err(format!("memory store: key `{key}` is broken"))
        } else {
            Ok(())
        }
    }

    fn breaker(&mut self, b: &BreakerSync<'_>, now: u64) -> Result<BreakerReply, String> {
        self.key_ok(b.key)?;
        let mut h = match self.take(b.key, now) {
            Some(Record::Breaker(h)) => h,
            // A new key numbers its rounds from the clock, as the script does, and starts
            // open for the break its syncing instance holds.
            _ => {
                // (As the script: a hold opens the key, for at most a break; a break under
                // a millisecond ends at once, and the rules then start a half-open round.)
                let hold = b.push.hold_ms;
                Box::new(BreakerRecord {
                    round: now % (1 << 30),
                    state: if hold > 0 { OPEN } else { CLOSED },
                    until: if hold > 0 {
                        now.saturating_add(hold.min(b.conf.break_ms))
                    } else {
                        0
                    },
                    ..BreakerRecord::default()
                })
            }
        };
        let reply = breaker_rules(&mut h, b.conf, &b.push, now);
        self.keys.insert(
            b.key.to_owned(),
            (Record::Breaker(h), now.saturating_add(b.conf.ttl_ms)),
        );
        Ok(reply)
    }

    fn budget(&mut self, b: &BudgetSync<'_>, now: u64) -> Result<BudgetReply, String> {
        self.key_ok(b.key)?;
        let p = &b.push;
        let mut t = match self.take(b.key, now) {
            Some(Record::Budget(t)) => t,
            _ => p.capacity,
        };
        t = t.saturating_add(p.earned).min(p.capacity);
        let grant = whole(p.want.min(t), p.cost);
        t -= grant;
        self.keys.insert(
            b.key.to_owned(),
            (Record::Budget(t), now.saturating_add(p.ttl_ms)),
        );
        Ok(BudgetReply { grant, tokens: t })
    }
}

impl Backend for MemoryBackend {
    fn round(
        &mut self,
        breakers: &[BreakerSync<'_>],
        budgets: &[BudgetSync<'_>],
        now: Instant,
    ) -> Result<RoundReply, String> {
        let mut m = self.0.lock();
        m.check()?;
        let now = m.ms(now);
        // Expired keys go, as in Redis: a guard dropped for good (one per tenant, say) does
        // not stay in the map.
        m.keys.retain(|_, (_, exp)| *exp > now);
        Ok(RoundReply {
            breakers: breakers.iter().map(|b| m.breaker(b, now)).collect(),
            budgets: budgets.iter().map(|b| m.budget(b, now)).collect(),
        })
    }
}

/// `amount` rounded down to a whole number of `cost`s (`amount` itself for a zero cost).
fn whole(amount: u64, cost: u64) -> u64 {
    match cost {
        0 => amount,
        c => amount / c * c,
    }
}

/// The breaker's script, in Rust.
fn breaker_rules(
    h: &mut BreakerRecord,
    c: &BreakerConf,
    p: &BreakerPush,
    now: u64,
) -> BreakerReply {
    let slot_ms = (c.window_ms / SLOTS).max(1);
    let epoch = now / slot_ms;
    let clear = |h: &mut BreakerRecord| h.slots = Default::default();
    let open = |h: &mut BreakerRecord| {
        h.state = OPEN;
        h.until = now.saturating_add(c.break_ms);
        h.slots = Default::default();
    };
    let new_round = |h: &mut BreakerRecord| {
        h.state = HALF_OPEN;
        h.round += 1;
        h.left = c.probes;
        h.pok = 0;
        h.pfail = 0;
        h.since = now;
    };
    if h.state == OPEN && now >= h.until {
        new_round(h);
    }
    if h.state == HALF_OPEN {
        if p.round == h.round {
            h.pok = h.pok.saturating_add(p.probe_ok);
            h.pfail = h.pfail.saturating_add(p.probe_fail);
        }
        if h.pok.saturating_add(h.pfail) >= c.probes {
            if h.pfail as f64 >= c.ratio * c.probes as f64 {
                open(h);
            } else {
                h.state = CLOSED;
                clear(h);
            }
        } else if h.left == 0 && now.saturating_sub(h.since) >= c.break_ms {
            new_round(h);
        }
    }
    let (mut sum_a, mut sum_f) = (0u64, 0u64);
    if h.state == CLOSED {
        let s = &mut h.slots[(epoch % SLOTS) as usize];
        if s.0 != epoch {
            *s = (epoch, 0, 0);
        }
        s.1 = s.1.saturating_add(p.attempts);
        s.2 = s.2.saturating_add(p.failures);
        for &(e, a, f) in &h.slots {
            if e + SLOTS > epoch && e <= epoch {
                sum_a = sum_a.saturating_add(a);
                sum_f = sum_f.saturating_add(f);
            }
        }
        if sum_a >= c.min_calls && sum_f as f64 >= c.ratio * sum_a as f64 {
            open(h);
        }
    }
    // Probes granted in an earlier round and not used yet are granted again, beside the
    // round's own.
    let mut grant = 0;
    if h.state == HALF_OPEN && p.held > 0 && p.round != h.round {
        grant = p.held;
    }
    if h.state == HALF_OPEN && p.want > 0 && h.left > 0 {
        let fresh = p.want.min(h.left);
        h.left -= fresh;
        grant += fresh;
        h.since = now;
    }
    BreakerReply {
        state: h.state,
        remaining_ms: if h.state == OPEN {
            h.until.saturating_sub(now)
        } else {
            0
        },
        round: h.round,
        grant,
        attempts: sum_a,
        failures: sum_f,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf() -> BreakerConf {
        BreakerConf {
            window_ms: 10_000,
            min_calls: 10,
            ratio: 0.5,
            break_ms: 1_000,
            probes: 2,
            ttl_ms: 60_000,
        }
    }

    #[test]
    fn the_rules_open_probe_and_close() {
        let c = conf();
        let mut h = BreakerRecord::default();
        let push = |a, f| BreakerPush {
            attempts: a,
            failures: f,
            ..Default::default()
        };
        // Nine failures: below the minimum.
        let r = breaker_rules(&mut h, &c, &push(9, 9), 100_000);
        assert_eq!((r.state, r.attempts, r.failures), (CLOSED, 9, 9));
        // The tenth, from another instance, opens it for the fleet.
        let r = breaker_rules(&mut h, &c, &push(1, 1), 100_100);
        assert_eq!((r.state, r.remaining_ms), (OPEN, 1_000));
        // After the break: half-open, two probes granted one by one, a third refused.
        let want = BreakerPush {
            want: 1,
            ..Default::default()
        };
        let r = breaker_rules(&mut h, &c, &want, 101_100);
        assert_eq!((r.state, r.grant, r.round), (HALF_OPEN, 1, 1));
        assert_eq!(breaker_rules(&mut h, &c, &want, 101_150).grant, 1);
        assert_eq!(breaker_rules(&mut h, &c, &want, 101_200).grant, 0);
        // Outcomes of an old round do not count; two successes of this one close it.
        let old = BreakerPush {
            round: 0,
            probe_fail: 2,
            ..Default::default()
        };
        assert_eq!(breaker_rules(&mut h, &c, &old, 101_300).state, HALF_OPEN);
        let ok = BreakerPush {
            round: 1,
            probe_ok: 2,
            ..Default::default()
        };
        let r = breaker_rules(&mut h, &c, &ok, 101_400);
        assert_eq!((r.state, r.attempts), (CLOSED, 0));
    }

    #[test]
    fn the_window_forgets_old_slots_and_stale_rounds_restart() {
        let c = conf();
        let mut h = BreakerRecord::default();
        let fail = BreakerPush {
            attempts: 9,
            failures: 9,
            ..Default::default()
        };
        breaker_rules(&mut h, &c, &fail, 0);
        // Eleven seconds later the nine failures have left the 10 s window.
        let r = breaker_rules(&mut h, &c, &fail, 11_000);
        assert_eq!((r.state, r.attempts), (CLOSED, 9));
        let r = breaker_rules(&mut h, &c, &fail, 12_000);
        assert_eq!(r.state, OPEN);
        let want = BreakerPush {
            want: 2,
            ..Default::default()
        };
        assert_eq!(breaker_rules(&mut h, &c, &want, 13_000).grant, 2);
        // The probes never answer: after another break, a new round.
        let r = breaker_rules(&mut h, &c, &want, 14_000);
        assert_eq!((r.state, r.round, r.grant), (HALF_OPEN, 2, 2));
    }

    /// A round restarts a break after it granted its last probe, not after it began: a probe
    /// granted late in a round that sat idle is not voided by the next sync.
    #[test]
    fn a_probe_granted_late_in_a_round_is_not_voided() {
        let c = conf();
        let mut h = BreakerRecord::default();
        let fail = BreakerPush {
            attempts: 10,
            failures: 10,
            ..Default::default()
        };
        assert_eq!(breaker_rules(&mut h, &c, &fail, 0).state, OPEN);
        let want = BreakerPush {
            want: 1,
            ..Default::default()
        };
        let r = breaker_rules(&mut h, &c, &want, 1_000);
        assert_eq!((r.state, r.grant, r.round), (HALF_OPEN, 1, 1));
        // The round sits idle past its break; then its second probe goes.
        assert_eq!(breaker_rules(&mut h, &c, &want, 5_000).grant, 1);
        // The next sync, a moment later: the same round, nothing more to grant.
        let r = breaker_rules(&mut h, &c, &want, 5_010);
        assert_eq!((r.state, r.round, r.grant), (HALF_OPEN, 1, 0));
        let ok = BreakerPush {
            round: 1,
            probe_ok: 2,
            ..Default::default()
        };
        assert_eq!(breaker_rules(&mut h, &c, &ok, 5_100).state, CLOSED);
    }

    /// The errors of a server that refuses every script, as Redis 7 sends them and as earlier
    /// versions wrap them in a script's error; a key's own error is not one.
    #[test]
    fn server_wide_errors_are_told_from_a_key_s_own() {
        let value = |resp: &str| redis::parse_redis_value(resp.as_bytes()).unwrap();
        for resp in [
            "-READONLY You can't write against a read only replica.\r\n",
            "-OOM command not allowed when used memory > 'maxmemory'.\r\n",
            "-ERR Error running script (call to f_0123): @user_script:4: @user_script: 4: -READONLY You can't write against a read only replica.\r\n",
            "-LOADING Redis is loading the dataset in memory\r\n",
        ] {
            assert!(server_wide(&value(resp)).is_some(), "{resp}");
        }
        for resp in [
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
            "-NOPERM this user has no permissions to access one of the keys used as arguments\r\n",
            "-ERR Error running script (call to f_0123): @user_script:9: attempt to compare nil\r\n",
            ":1\r\n",
        ] {
            assert!(server_wide(&value(resp)).is_none(), "{resp}");
        }
    }

    #[test]
    fn the_memory_budget_conserves_tokens_and_expires() {
        let store = MemoryStore::new();
        let mut b = MemoryBackend(store.clone());
        let t0 = Instant::now();
        let mut budget = |key, earned, want, now| {
            let push = BudgetPush {
                capacity: 5_000,
                earned,
                want,
                ttl_ms: 1_000,
                cost: 1_000,
            };
            let r = b.round(&[], &[BudgetSync { key, push }], now)?;
            r.budgets.into_iter().next().expect("one reply")
        };
        assert_eq!(
            budget("k", 0, 3_000, t0).unwrap(),
            BudgetReply {
                grant: 3_000,
                tokens: 2_000
            }
        );
        assert_eq!(budget("k", 0, 3_000, t0).unwrap().grant, 2_000);
        // Leases are whole retries (cost 1.000): half a token stays in the bucket, where
        // earnings complete it, instead of in a lease that could pay for nothing.
        assert_eq!(
            budget("k", 500, 3_000, t0).unwrap(),
            BudgetReply {
                grant: 0,
                tokens: 500
            }
        );
        assert_eq!(
            budget("k", 700, 3_000, t0).unwrap(),
            BudgetReply {
                grant: 1_000,
                tokens: 200
            }
        );
        assert_eq!(store.keys(t0), ["k"]);
        assert!(store.keys(t0 + Duration::from_secs(2)).is_empty());
        // A round drops the expired keys it does not sync.
        assert!(budget("other", 0, 0, t0 + Duration::from_secs(2)).is_ok());
        assert_eq!(store.held(), 1, "`k` is gone");
        // Expired: a full bucket again.
        assert_eq!(
            budget("k", 0, 0, t0 + Duration::from_secs(2))
                .unwrap()
                .tokens,
            5_000
        );
        // One broken key fails alone.
        store.set_broken("bad", true);
        assert!(budget("bad", 0, 1_000, t0).is_err());
        assert_eq!(budget("k", 0, 1_000, t0).unwrap().grant, 1_000);
        store.set_broken("bad", false);
        assert!(budget("bad", 0, 1_000, t0).is_ok());
        store.set_down(true);
        assert!(budget("k", 0, 0, t0).is_err());
    }

    /// The breaker's script with its clock read from `ARGV[15]` instead of Redis's `TIME`, so
    /// that a test can give it the times it gives the memory store.
    fn breaker_script_at_argv_time() -> String {
        let time = "local t = redis.call('TIME')\nlocal now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n";
        assert!(
            BREAKER_SCRIPT.contains(time),
            "the script reads its clock as this test expects"
        );
        BREAKER_SCRIPT.replace(time, "local now = tonumber(ARGV[15])\n")
    }

    /// How much time passes before a breaker's sync: a number of ms, or exactly to a boundary
    /// of the rules (the end of the last reply's break, a break's length, a window's slot).
    #[derive(Debug, Clone, Copy)]
    enum Dt {
        Ms(u64),
        Remaining,
        Break,
        Slot,
    }

    /// One step of a differential run: which key, how much time passes, what is pushed.
    #[derive(Debug, Clone)]
    enum Step {
        Breaker {
            key: usize,
            dt: Dt,
            push: BreakerPush,
            /// Whether the push's round is the key's last answered one (else `push.round`).
            current_round: bool,
        },
        Budget {
            key: usize,
            push: BudgetPush,
        },
        /// The key is lost on both sides (expired, or Redis restarted without it): the next
        /// sync makes it anew.
        Lose {
            breaker: bool,
            key: usize,
        },
    }

    fn breaker_conf() -> impl proptest::strategy::Strategy<Value = BreakerConf> {
        use proptest::prelude::*;
        (
            1u64..5_000,
            1u64..12,
            prop::sample::select(vec![0.1, 0.25, 0.5, 0.75, 1.0]),
            // (A break under a millisecond is 0 ms here.)
            prop_oneof![Just(0u64), 1u64..3_000],
            1u64..4,
        )
            .prop_map(
                |(window_ms, min_calls, ratio, break_ms, probes)| BreakerConf {
                    window_ms,
                    min_calls,
                    ratio,
                    break_ms,
                    probes,
                    // Long enough that no key expires in a run (Redis expires on its own clock).
                    ttl_ms: 3_600_000,
                },
            )
    }

    fn step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        let breaker = (
            0usize..2,
            prop_oneof![
                Just(Dt::Ms(0)),
                (0u64..200).prop_map(Dt::Ms),
                (0u64..4_000).prop_map(Dt::Ms),
                Just(Dt::Remaining),
                Just(Dt::Break),
                Just(Dt::Slot),
            ],
            (0u64..8, 0u64..8),
            (0u64..3, 0u64..3, 0u64..2, 0u64..2),
            any::<bool>(),
            0u64..4,
            prop_oneof![Just(0u64), 1u64..8_000],
        )
            .prop_map(
                |(
                    key,
                    dt,
                    (attempts, failures),
                    (probe_ok, probe_fail, want, held),
                    current_round,
                    round,
                    hold_ms,
                )| {
                    Step::Breaker {
                        key,
                        dt,
                        push: BreakerPush {
                            attempts,
                            failures: failures.min(attempts),
                            round,
                            probe_ok,
                            probe_fail,
                            want,
                            held,
                            hold_ms,
                        },
                        current_round,
                    }
                },
            );
        let budget = (0usize..2, 0u64..8, 0u64..8, 0u64..8, 0u64..3).prop_map(
            |(key, capacity, earned, want, cost)| Step::Budget {
                key,
                push: BudgetPush {
                    capacity: capacity * 1_000,
                    earned: earned * 400,
                    want: want * 700,
                    ttl_ms: 3_600_000,
                    cost: cost * 1_000,
                },
            },
        );
        let lose =
            (any::<bool>(), 0usize..2).prop_map(|(breaker, key)| Step::Lose { breaker, key });
        prop_oneof![8 => breaker, 2 => budget, 1 => lose]
    }

    /// On a real `redis-server`: a breaker's key deleted during a break is remade open by
    /// the next instance that holds the break; one set to `state 0` by hand stays closed (the
    /// way the README gives to close a breaker by hand).
    #[test]
    fn a_deleted_key_is_remade_open_and_a_hand_closed_one_stays_closed() {
        let Some(server) = crate::guard::fleet::redis_server::for_test(
            "a_deleted_key_is_remade_open_and_a_hand_closed_one_stays_closed",
        ) else {
            return;
        };
        let mut con = redis::Client::open(server.url())
            .unwrap()
            .get_connection_with_timeout(Duration::from_secs(5))
            .unwrap();
        let script = redis::Script::new(&breaker_script_at_argv_time());
        let conf = BreakerConf {
            window_ms: 10_000,
            min_calls: 2,
            ratio: 0.5,
            break_ms: 5_000,
            probes: 1,
            ttl_ms: 60_000,
        };
        let mut sync = |push: BreakerPush, now: u64| -> BreakerReply {
            let b = BreakerSync {
                key: "hand",
                conf: &conf,
                push,
            };
            let v: Vec<i64> = breaker_invocation(&script, &b)
                .arg(now)
                .invoke(&mut con)
                .unwrap();
            BreakerReply {
                state: u8::try_from(at(&v, 0)).unwrap(),
                remaining_ms: at(&v, 1),
                round: at(&v, 2),
                grant: at(&v, 3),
                attempts: at(&v, 4),
                failures: at(&v, 5),
            }
        };
        let t = 1_700_000_000_000u64;
        let failed = BreakerPush {
            attempts: 2,
            failures: 2,
            ..BreakerPush::default()
        };
        assert_eq!(sync(failed, t).state, OPEN);
        let holding = BreakerPush {
            hold_ms: 4_000,
            ..BreakerPush::default()
        };
        let mut con2 = redis::Client::open(server.url())
            .unwrap()
            .get_connection_with_timeout(Duration::from_secs(5))
            .unwrap();
        let () = redis::cmd("DEL").arg("hand").query(&mut con2).unwrap();
        let r = sync(holding, t + 1_000);
        assert_eq!((r.state, r.remaining_ms), (OPEN, 4_000));
        let () = redis::cmd("HSET")
            .arg("hand")
            .arg("state")
            .arg(0)
            .query(&mut con2)
            .map(|_: i64| ())
            .unwrap();
        assert_eq!(sync(holding, t + 2_000).state, CLOSED);
    }

    /// The Lua scripts, run by a real `redis-server`, and the memory store's rules in Rust
    /// give the same replies when given the same times and pushes: random runs of syncs on two
    /// breaker keys (each with its own settings) and two budget keys, some lost on both sides
    /// and made anew, from the same start,
    /// with the script's clock read from its arguments. (Without `redis-server` on the PATH
    /// this test says so on stderr and passes, unless `ROBUST_REQUIRE_REDIS=1`.)
    #[test]
    fn the_scripts_and_the_memory_store_agree() {
        use proptest::prelude::*;
        use std::sync::atomic::{AtomicU64, Ordering};
        let Some(server) =
            crate::guard::fleet::redis_server::for_test("the_scripts_and_the_memory_store_agree")
        else {
            return;
        };
        let client = redis::Client::open(server.url()).unwrap();
        let con = std::sync::Mutex::new(
            client
                .get_connection_with_timeout(Duration::from_secs(5))
                .unwrap(),
        );
        let breaker_script = redis::Script::new(&breaker_script_at_argv_time());
        let budget_script = redis::Script::new(BUDGET_SCRIPT);
        let runs = AtomicU64::new(0);
        let config = ProptestConfig {
            cases: 48,
            failure_persistence: None,
            ..ProptestConfig::default()
        };
        proptest!(config, |(
            confs in (breaker_conf(), breaker_conf()),
            // A Unix time in ms, as Redis's clock gives (new keys number their rounds from it).
            start in 1_600_000_000_000u64..1_900_000_000_000,
            steps in proptest::collection::vec(step(), 1..120),
        )| {
            let run = runs.fetch_add(1, Ordering::Relaxed);
            let mut con = con.lock().unwrap();
            let memory = MemoryStore::new();
            let mut m = memory.lock();
            let key = |kind: &str, i: usize| format!("diff:{run}:{kind}:{i}");
            let confs = [confs.0, confs.1];
            let mut rounds = [0u64; 2];
            let mut remaining = [0u64; 2];
            let mut now = start;
            for (n, step) in steps.iter().enumerate() {
                match step {
                    Step::Breaker { key: i, dt, push, current_round } => {
                        let c = &confs[*i];
                        now += match dt {
                            Dt::Ms(ms) => *ms,
                            Dt::Remaining => remaining[*i],
                            Dt::Break => c.break_ms,
                            Dt::Slot => (c.window_ms / SLOTS).max(1),
                        };
                        let mut push = *push;
                        if *current_round {
                            push.round = rounds[*i];
                        }
                        let k = key("breaker", *i);
                        let sync = BreakerSync { key: &k, conf: c, push };
                        // (The production arguments, and the clock as the 15th.)
                        let lua: Vec<i64> = breaker_invocation(&breaker_script, &sync)
                            .arg(now)
                            .invoke(&mut *con)
                            .unwrap();
                        let lua = BreakerReply {
                            state: u8::try_from(at(&lua, 0)).unwrap(),
                            remaining_ms: at(&lua, 1),
                            round: at(&lua, 2),
                            grant: at(&lua, 3),
                            attempts: at(&lua, 4),
                            failures: at(&lua, 5),
                        };
                        let rust = m.breaker(&sync, now).unwrap();
                        prop_assert_eq!(lua, rust, "step {}: {:?} at {}", n, step, now);
                        rounds[*i] = rust.round;
                        remaining[*i] = rust.remaining_ms;
                    }
                    Step::Lose { breaker, key: i } => {
                        let k = key(if *breaker { "breaker" } else { "budget" }, *i);
                        let () = redis::cmd("DEL").arg(&k).query(&mut *con).unwrap();
                        m.keys.remove(&k);
                    }
                    Step::Budget { key: i, push } => {
                        let k = key("budget", *i);
                        let sync = BudgetSync { key: &k, push: *push };
                        let lua: Vec<i64> = budget_invocation(&budget_script, &sync)
                            .invoke(&mut *con)
                            .unwrap();
                        let lua = BudgetReply {
                            grant: at(&lua, 0),
                            tokens: at(&lua, 1),
                        };
                        let rust = m.budget(&sync, now).unwrap();
                        prop_assert_eq!(lua, rust, "step {}: {:?}", n, step);
                    }
                }
            }
        });
    }
}
