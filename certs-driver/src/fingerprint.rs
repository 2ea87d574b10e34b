//! [`Fingerprint`]: how `stratum carotate` names a CA. A leaf: the plan, the statuses, the
//! steps and the gates all name CAs by it.

use std::fmt;

use sha2::{Digest, Sha256};

/// A CA certificate's fingerprint: `sha256:` and the 64 lowercase hex digits of the SHA-256 of
/// its DER encoding, as `stratum carotate` names CAs.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct Fingerprint(String);

impl Fingerprint {
    /// Reads `s`: `sha256:` and exactly 64 lowercase hex digits; `None` for anything else.
    pub fn parse(s: &str) -> Option<Fingerprint> {
        let hex = s.strip_prefix("sha256:")?;
        let ok = hex.len() == 64
            && hex
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c));
        ok.then(|| Fingerprint(s.to_string()))
    }

    /// The fingerprint of a certificate's DER encoding.
    pub fn of_der(der: &[u8]) -> Fingerprint {
        let digest = Sha256::digest(der);
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        Fingerprint(format!("sha256:{hex}"))
    }

    /// As written: `sha256:…`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The hex digits alone.
    pub fn hex(&self) -> &str {
        self.0.strip_prefix("sha256:").unwrap_or(&self.0)
    }

    /// Its first 12 hex digits (`d4501ab39bde`): how `kubectl get car` and a resource's
    /// default name show it.
    pub fn short(&self) -> &str {
        let hex = self.hex();
        &hex[..hex.len().min(12)]
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
