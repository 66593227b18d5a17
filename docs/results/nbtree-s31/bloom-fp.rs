// False positives of the d-tree Bloom filter's two probe schemes by filter size (issue 22,
// session 31): `rustc -O bloom-fp.rs && ./bloom-fp`. A standalone restatement of
// `crates/sylva/src/nbtree/bloom.rs` (hash, block, probes) with random 8-byte keys, 10 bits a
// key, k = 7, and 2M keys not in the filter asked per size.
fn hash(key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key { h ^= u64::from(b); h = h.wrapping_mul(0x0000_0100_0000_01b3); }
    h ^= h >> 33; h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33; h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53); h ^ (h >> 33)
}
fn block_of(h: u64, blocks: u32) -> usize { (((h >> 32) * u64::from(blocks)) >> 32) as usize }
fn probes_old(h: u64, k: u32) -> Vec<u32> {
    let h1 = h as u32; let h2 = ((h >> 32) as u32).rotate_left(16) | 1;
    (0..k).map(|i| h1.wrapping_add(i.wrapping_mul(h2)) % 512).collect()
}
fn probes_new(h: u64, k: u32) -> Vec<u32> {
    // two 9-bit fields from the low 32 bits only
    let h1 = h as u32; let h2 = (h1 >> 16) | 1;
    (0..k).map(|i| (h1 & 0xffff).wrapping_add(i.wrapping_mul(h2)) % 512).collect()
}
fn fp(n: u64, bpk: u64, newp: bool) -> f64 {
    let blocks = ((n * bpk + 511) / 512).max(1) as u32;
    let k = 7;
    let mut b = vec![0u64; blocks as usize * 8];
    let mut x = 0x1234_5678_9abc_def0u64;
    let mut next = || { x ^= x << 13; x ^= x >> 7; x ^= x << 17; x };
    for _ in 0..n { let key = next().to_be_bytes(); let h = hash(&key); let bl = block_of(h, blocks);
        for p in if newp {probes_new(h,k)} else {probes_old(h,k)} { b[bl*8 + (p/64) as usize] |= 1 << (p%64); } }
    let q = 2_000_000; let mut hits = 0;
    for _ in 0..q { let key = next().to_be_bytes(); let h = hash(&key); let bl = block_of(h, blocks);
        if (if newp {probes_new(h,k)} else {probes_old(h,k)}).iter().all(|&p| b[bl*8 + (p/64) as usize] & (1 << (p%64)) != 0) { hits += 1; } }
    hits as f64 / q as f64
}
fn main() {
    for n in [1_000u64, 10_000, 100_000, 250_000, 1_000_000, 4_000_000, 16_000_000, 50_000_000] {
        println!("{n:>10} old {:.4} new {:.4}", fp(n, 10, false), fp(n, 10, true));
    }
}
