//! A small seeded generator (SplitMix64): the fake's only source of randomness, so a seed
//! replays a run exactly. Not for anything but tests.

/// SplitMix64 (Steele, Lea, Flood 2014): one `u64` of state, good enough spread for names,
/// UIDs and fault draws, and stable across platforms and releases.
#[derive(Clone, Debug)]
pub(crate) struct Rng(u64);

/// The alphabet the apiserver's `generateName` draws from (`k8s.io/apiserver/pkg/storage/names`,
/// `utilrand.String`): no vowels, no confusable `0`, `1`, `3`.
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

impl Rng {
    /// A generator for one independent stream of `seed`.
    pub(crate) fn new(seed: u64, stream: u64) -> Self {
        Rng(seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03))
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform draw in `[0, 1)`.
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// `n` characters as `generateName` appends them.
    pub(crate) fn name_suffix(&mut self, n: usize) -> String {
        (0..n)
            .map(|_| {
                let i = (self.next_u64() % NAME_ALPHABET.len() as u64) as usize;
                char::from(NAME_ALPHABET[i])
            })
            .collect()
    }

    /// A version-4 UUID string, as the apiserver assigns `metadata.uid`.
    pub(crate) fn uuid(&mut self) -> String {
        let (a, b) = (self.next_u64(), self.next_u64());
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0x0fff,
            ((b >> 48) & 0x3fff) | 0x8000,
            b & 0xffff_ffff_ffff
        )
    }

    /// `n` bytes as lowercase hex (container IDs).
    pub(crate) fn hex(&mut self, n: usize) -> String {
        let mut s = String::with_capacity(n * 2);
        while s.len() < n * 2 {
            s.push_str(&format!("{:016x}", self.next_u64()));
        }
        s.truncate(n * 2);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn same_seed_same_stream() {
        let (mut a, mut b) = (Rng::new(7, 1), Rng::new(7, 1));
        assert_eq!(a.uuid(), b.uuid());
        assert_eq!(a.name_suffix(5), b.name_suffix(5));
        assert_ne!(Rng::new(7, 1).next_u64(), Rng::new(7, 2).next_u64());
    }

    #[test]
    fn uuid_is_v4_shaped() {
        let id = Rng::new(1, 0).uuid();
        let parts: Vec<&str> = id.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(parts[2].starts_with('4'));
        assert!(matches!(parts[3].as_bytes()[0], b'8' | b'9' | b'a' | b'b'));
    }
}
