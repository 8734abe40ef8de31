//! The tests' seeded pseudo-random numbers: xorshift64 (Marsaglia), so a randomized test is the
//! same on every run and every machine, without a dependency.

/// A generator of the xorshift64 sequence from `seed` (which must not be zero).
pub(crate) fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    }
}
