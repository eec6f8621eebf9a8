// The body of `sync_fn.rs`'s `included_reads_ctx`: it reads the attempt's context, which only
// this file mentions.
{
    attempt();
    time.advance(Duration::from_secs(2));
    Ok(ctx.is_expired())
}
