// The body of `sync_fn.rs`'s `included_body`: it moves the parameter `name`, which only this
// file mentions.
{
    if attempt() < 3 { Err(name) } else { Ok(name.len()) }
}
