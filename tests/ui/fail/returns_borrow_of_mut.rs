use retry_runtime::robust;

#[robust]
fn first(v: &mut Vec<u8>) -> std::io::Result<&mut u8> {
    v.first_mut().ok_or(std::io::ErrorKind::NotFound.into())
}

struct Pool(Vec<u8>);

impl Pool {
    #[robust]
    fn get(&mut self) -> std::io::Result<&u8> {
        self.0.first().ok_or(std::io::ErrorKind::NotFound.into())
    }

    // The closure type's `&u8` is its own, but the `'_` bound after its output borrows `self`.
    #[robust]
    fn matcher(&mut self) -> std::io::Result<Box<dyn Fn(&u8) -> bool + '_>> {
        Ok(Box::new(move |b: &u8| self.0.contains(b)))
    }
}

#[robust]
fn named<'a>(v: &'a mut Vec<u8>, _k: &str) -> std::io::Result<&'a u8> {
    v.first().ok_or(std::io::ErrorKind::NotFound.into())
}

fn main() {}
