// Rules are tried in order, the `when`s as written and then the `on` list: a pattern an earlier
// rule's pattern covers never applies, and a pattern that binds a name (a constant that is not
// in scope, say) matches every value in that place. Both are errors at the pattern.
use retry_runtime::robust;

#[derive(Debug)]
pub enum ApiError {
    Status(u16),
    Reset,
    Busy,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

#[derive(Debug, PartialEq)]
pub enum Reply {
    Done,
    Later(u32),
}

// Every status is taken by the first rule: 429s get 2 retries, never 10.
#[robust(when(ApiError::Status(_), retries = 2),
         when(ApiError::Status(429), retries = 10, backoff = constant(base = 1s)))]
fn broader_first() -> Result<(), ApiError> { Ok(()) }

// An alternative of an earlier rule covers a later one.
#[robust(when(ApiError::Reset | ApiError::Busy, retries = 2), when(ApiError::Busy, retries = 5))]
fn alternative_first() -> Result<(), ApiError> { Ok(()) }

// A `when` takes the statuses before the `on` list is asked.
#[robust(when(ApiError::Status(500..=599), retries = 1), on = [ApiError::Status(503)])]
fn when_before_on() -> Result<(), ApiError> { Ok(()) }

// One alternative of an `on` kind is taken by a `when` before it. (Written as the `when`'s own
// kind, `on = [ApiError::Reset | ApiError::Busy], when(ApiError::Busy, ..)`, it would say that
// busy errors are retried, with the `when`'s settings: allowed.)
#[robust(when(ApiError::Status(_), retries = 2), on = [ApiError::Reset | ApiError::Status(503)])]
fn part_of_an_alternative() -> Result<(), ApiError> { Ok(()) }

// The same in the `on` list.
#[robust(on = [ApiError::Status(_), ApiError::Status(503)])]
fn wider_first_in_on() -> Result<(), ApiError> { Ok(()) }

// `TOO_MANY_REQUESTS` is not in scope: the pattern binds every status to that name.
#[robust(when(ApiError::Status(TOO_MANY_REQUESTS), retries = 10))]
fn binds_a_name() -> Result<(), ApiError> { Ok(()) }

// The same name as a `when`'s constant, but not in scope here: still a binding.
mod codes {
    pub const TOO_MANY_REQUESTS: u16 = 429;
}
#[robust(when(ApiError::Status(codes::TOO_MANY_REQUESTS), retries = 10),
         on = [ApiError::Status(TOO_MANY_REQUESTS)])]
fn binds_a_when_s_constant_name() -> Result<(), ApiError> { Ok(()) }

// Values too.
#[robust(when(Ok(Reply::Later(_)), retries = 1), on = [Ok(Reply::Later(5))])]
fn value_behind_a_wider_one() -> Result<Reply, ApiError> { Ok(Reply::Done) }

#[robust(on = [Ok(Reply::Later(seconds))])]
fn value_binds_a_name() -> Result<Reply, ApiError> { Ok(Reply::Done) }

fn main() {}
