//! Where a call keeps the instants it needs ([`Times`]).

use std::time::Instant;

use crate::time::Clock;

/// Where a call keeps the instants it needs: [`Timed`] keeps the first attempt's start and the
/// current attempt's deadline; [`Untimed`] keeps nothing, for calls that never read them (no
/// attempt context, no `max_delay`, no cooperative timeout, no `on_retry`), which keeps async
/// futures small.
pub trait Times: Default {
    /// Whether the call blocks its thread to wait ([`Blocking`]): it then reads the clock that
    /// agrees with [`Sleep::sleep`](crate::time::Sleep::sleep),
    /// [`Clock::now_blocking`], instead of [`Clock::now`].
    const BLOCKING: bool = false;
    /// When the first attempt started; records `now` if that is not known.
    fn first_or(&mut self, now: Instant) -> Instant;
    /// When the first attempt started, if it has and that is kept.
    fn first(&self) -> Option<Instant>;
    /// The current attempt's deadline.
    fn deadline(&self) -> Option<Instant>;
    /// Sets the current attempt's deadline.
    fn set_deadline(&mut self, deadline: Option<Instant>);
    /// When the current attempt's own timeout, read when it started, ends: kept by a blocking
    /// call only, whose cooperative attempts may run past it (see
    /// [`Call::measure`](crate::Call::measure)); `None` otherwise.
    #[doc(hidden)]
    #[inline(always)]
    fn own_end(&self) -> Option<Instant> {
        None
    }
    /// Keeps the current attempt's own end (see [`own_end`](Self::own_end)); nothing by default.
    #[doc(hidden)]
    #[inline(always)]
    fn set_own_end(&mut self, _own_end: Option<Instant>) {}
    /// The first attempt starts at `now` after all (it waited for a slot of a concurrency limit
    /// since the call read its start): a kept first instant moves there; nothing by default.
    #[doc(hidden)]
    #[inline(always)]
    fn restart_first(&mut self, _now: Instant) {}
}

/// The instants of a call that reads time (see [`Times`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Timed {
    pub(crate) first: Option<Instant>,
    pub(crate) deadline: Option<Instant>,
}

impl Timed {
    /// The instants of a call whose first attempt starts now on `clock` (its blocking reading
    /// for a blocking call).
    #[inline]
    pub(crate) fn now<C: Clock + ?Sized>(clock: &C, blocking: bool) -> Self {
        let now = if blocking {
            clock.now_blocking()
        } else {
            clock.now()
        };
        Timed {
            first: Some(now),
            deadline: None,
        }
    }
}

impl Times for Timed {
    #[inline]
    fn first_or(&mut self, now: Instant) -> Instant {
        *self.first.get_or_insert(now)
    }
    #[inline]
    fn first(&self) -> Option<Instant> {
        self.first
    }
    #[inline]
    fn deadline(&self) -> Option<Instant> {
        self.deadline
    }
    #[inline]
    fn set_deadline(&mut self, deadline: Option<Instant>) {
        self.deadline = deadline;
    }
    #[inline]
    fn restart_first(&mut self, now: Instant) {
        if self.first.is_some() {
            self.first = Some(now);
        }
    }
}

/// No instants: the first attempt is taken to start now, there is no deadline (see [`Times`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Untimed;

impl Times for Untimed {
    #[inline(always)]
    fn first_or(&mut self, now: Instant) -> Instant {
        now
    }
    #[inline(always)]
    fn first(&self) -> Option<Instant> {
        None
    }
    #[inline(always)]
    fn deadline(&self) -> Option<Instant> {
        None
    }
    #[inline(always)]
    fn set_deadline(&mut self, _: Option<Instant>) {}
}

/// The instants `Tm` of a blocking call (see [`Times`]), read from the clock that agrees with
/// the blocking sleeper ([`Clock::now_blocking`]). [`Policy::start_blocking`](crate::Policy::start_blocking) and
/// [`Policy::start_lazy_blocking`](crate::Policy::start_lazy_blocking) make such calls.
///
/// It also keeps where the current attempt's own timeout ends, as read when the attempt
/// started: an attempt that runs past it is judged by that limit, not by one an adaptive
/// timeout has moved to while it ran.
#[derive(Debug, Clone, Copy, Default)]
pub struct Blocking<Tm = Timed>(pub(crate) Tm, pub(crate) Option<Instant>);

impl<Tm> Blocking<Tm> {
    #[inline(always)]
    pub(crate) const fn new(times: Tm) -> Self {
        Blocking(times, None)
    }
}

impl<Tm: Times> Times for Blocking<Tm> {
    const BLOCKING: bool = true;
    #[inline(always)]
    fn first_or(&mut self, now: Instant) -> Instant {
        self.0.first_or(now)
    }
    #[inline(always)]
    fn first(&self) -> Option<Instant> {
        self.0.first()
    }
    #[inline(always)]
    fn deadline(&self) -> Option<Instant> {
        self.0.deadline()
    }
    #[inline(always)]
    fn set_deadline(&mut self, deadline: Option<Instant>) {
        self.0.set_deadline(deadline)
    }
    #[inline(always)]
    fn own_end(&self) -> Option<Instant> {
        self.1
    }
    #[inline(always)]
    fn set_own_end(&mut self, own_end: Option<Instant>) {
        self.1 = own_end;
    }
    #[inline(always)]
    fn restart_first(&mut self, now: Instant) {
        self.0.restart_first(now);
    }
}

/// What [`Policy::start_lazy`](crate::Policy::start_lazy) keeps: nothing, unless the `tracing` feature is on, whose events
/// report the time since the first attempt.
#[cfg(not(feature = "tracing"))]
pub type LazyTimes = Untimed;
/// What [`Policy::start_lazy`](crate::Policy::start_lazy) keeps: nothing, unless the `tracing` feature is on, whose events
/// report the time since the first attempt.
#[cfg(feature = "tracing")]
pub type LazyTimes = Timed;
