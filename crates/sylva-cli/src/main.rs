#[cfg(feature = "peers")]
#[allow(dead_code)] // until `sylva bench` opens the peers
mod peers;

fn main() {}
