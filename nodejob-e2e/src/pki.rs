//! Certificates of a real node's kubelet, as `stratum carotate` changes them for real and as
//! the tests read them: [`Ca`] (a CA whose key is at hand: the rotation's new CA, made by a
//! test, or one a host finds in its keyring), [`KubeletPki`] (the kubelet's trust bundle, its
//! client and serving certificates, in the node's `DIR/pki`), [`Keyring`] (the CAs placed on
//! a host out of band, `DIR/host/ca`), and what names a CA: its fingerprint, `sha256:` and the
//! hex of the SHA-256 of its DER, as `certs-driver`'s `Fingerprint` names it.
//!
//! It talks to no cluster; `ControlPlaneTrust` is what a test does to the shared apiserver's
//! files with it.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, DnValue,
    ExtendedKeyUsagePurpose, IsCa, Issuer, KeyIdMethod, KeyPair, KeyUsagePurpose, SanType,
};
use sha2::{Digest, Sha256};
use x509_parser::prelude::{FromDer, ParsedExtension, X509Certificate};

/// An error, said with what it was about.
pub type Error = String;

/// `sha256:` and the 64 hex digits of the SHA-256 of `der`.
pub fn fingerprint(der: &[u8]) -> String {
    let digest = Sha256::digest(der);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// Standard base64 with padding.
pub fn base64(der: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut text = String::new();
    for chunk in der.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                text.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                text.push('=');
            }
        }
    }
    text
}

/// `der` as one PEM `CERTIFICATE` block.
pub fn certificate_pem(der: &[u8]) -> String {
    let body = base64(der);
    let lines: Vec<&str> = (body.as_bytes().chunks(64))
        .map(|l| std::str::from_utf8(l).unwrap_or_default())
        .collect();
    format!(
        "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
        lines.join("\n")
    )
}

/// The DER of every `CERTIFICATE` block of `text`, in order.
pub fn certificates(text: &str) -> Result<Vec<Vec<u8>>, Error> {
    let mut ders = Vec::new();
    for pem in x509_parser::pem::Pem::iter_from_buffer(text.as_bytes()) {
        let pem = pem.map_err(|e| format!("a PEM block: {e}"))?;
        if pem.label == "CERTIFICATE" {
            ders.push(pem.contents);
        }
    }
    Ok(ders)
}

fn parse(der: &[u8]) -> Result<X509Certificate<'_>, Error> {
    X509Certificate::from_der(der)
        .map(|(_, c)| c)
        .map_err(|e| format!("a certificate: {e}"))
}

fn key_ids(cert: &X509Certificate<'_>) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
    let (mut subject, mut authority) = (None, None);
    for ext in cert.extensions() {
        match ext.parsed_extension() {
            ParsedExtension::SubjectKeyIdentifier(id) => subject = Some(id.0.to_vec()),
            ParsedExtension::AuthorityKeyIdentifier(aki) => {
                authority = aki.key_identifier.as_ref().map(|id| id.0.to_vec());
            }
            _ => {}
        }
    }
    (subject, authority)
}

/// Which of `cas` (DER) issued `leaf` (DER): the one whose subject is the leaf's issuer and,
/// where both say it, whose key identifier is the leaf's authority key identifier. Its
/// fingerprint, or `None`.
pub fn issuer_of(leaf: &[u8], cas: &[Vec<u8>]) -> Result<Option<String>, Error> {
    let leaf_cert = parse(leaf)?;
    let (_, authority) = key_ids(&leaf_cert);
    for ca in cas {
        let ca_cert = parse(ca)?;
        if ca_cert.subject().as_raw() != leaf_cert.issuer().as_raw() {
            continue;
        }
        let (subject, _) = key_ids(&ca_cert);
        if let (Some(a), Some(s)) = (&authority, &subject)
            && a != s
        {
            continue;
        }
        return Ok(Some(fingerprint(ca)));
    }
    Ok(None)
}

/// The common name of `der`'s subject.
pub fn common_name(der: &[u8]) -> Result<String, Error> {
    let cert = parse(der)?;
    let cn = cert.subject().iter_common_name().next();
    cn.and_then(|a| a.as_str().ok())
        .map(String::from)
        .ok_or_else(|| "a certificate with no common name".to_string())
}

/// A CA whose private key is at hand: it signs.
pub struct Ca {
    der: Vec<u8>,
    key: KeyPair,
}

impl Ca {
    /// A new self-signed CA named `name` (rcgen's default key: ECDSA P-256).
    pub fn generate(name: &str) -> Result<Ca, Error> {
        let bad = |e: rcgen::Error| format!("making CA {name}: {e}");
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(bad)?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().map_err(bad)?;
        let cert = params.self_signed(&key).map_err(bad)?;
        Ok(Ca {
            der: cert.der().to_vec(),
            key,
        })
    }

    /// The CA of certificate `cert_pem` (its first block) and key `key_pem`.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Ca, Error> {
        let der = (certificates(cert_pem)?.into_iter().next())
            .ok_or_else(|| "no certificate".to_string())?;
        let key = KeyPair::from_pem(key_pem).map_err(|e| format!("a CA's key: {e}"))?;
        Ok(Ca { der, key })
    }

    /// Its certificate, DER.
    pub fn der(&self) -> &[u8] {
        &self.der
    }

    /// Its certificate, PEM.
    pub fn certificate_pem(&self) -> String {
        certificate_pem(&self.der)
    }

    /// Its private key, PEM (PKCS#8).
    pub fn key_pem(&self) -> String {
        self.key.serialize_pem()
    }

    /// Its private key, DER (PKCS#8).
    pub fn key_der(&self) -> Vec<u8> {
        self.key.serialize_der()
    }

    /// Its fingerprint.
    pub fn fingerprint(&self) -> String {
        fingerprint(&self.der)
    }

    fn issuer(&self) -> Result<Issuer<'_, &KeyPair>, Error> {
        Issuer::from_ca_cert_der(&self.der.as_slice().into(), &self.key)
            .map_err(|e| format!("the CA as issuer: {e}"))
    }

    /// A leaf for `subject` (`(type, value)`s), `usage` its extended key usage, `names` its
    /// subject alternative names (IP addresses or DNS names): its certificate and key, PEM.
    pub fn issue(
        &self,
        subject: &[(DnType, &str)],
        usage: ExtendedKeyUsagePurpose,
        names: &[&str],
    ) -> Result<(String, String), Error> {
        let bad = |e: rcgen::Error| format!("issuing a leaf: {e}");
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(bad)?;
        for (ty, value) in subject {
            params.distinguished_name.push(ty.clone(), *value);
        }
        params.subject_alt_names = (names.iter())
            .map(|n| match n.parse() {
                Ok(ip) => Ok(SanType::IpAddress(ip)),
                Err(_) => (*n).try_into().map(SanType::DnsName).map_err(bad),
            })
            .collect::<Result<_, _>>()?;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![usage];
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate().map_err(bad)?;
        let cert = params.signed_by(&key, &self.issuer()?).map_err(bad)?;
        Ok((cert.pem(), key.serialize_pem()))
    }

    /// `other` (a CA's certificate, DER, whose key pair is `other_key`) signed by this CA: the
    /// same subject, key and key identifier, so a leaf of `other` chains to this CA through
    /// it (a cross-certificate). PEM.
    pub fn cross_sign(&self, other: &[u8], other_key: &KeyPair) -> Result<String, Error> {
        let bad = |e: rcgen::Error| format!("cross-signing: {e}");
        let cert = parse(other)?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(bad)?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params.distinguished_name = name_of(&cert)?;
        if let (Some(ski), _) = key_ids(&cert) {
            params.key_identifier_method = KeyIdMethod::PreSpecified(ski);
        }
        params.use_authority_key_identifier_extension = true;
        let signed = params.signed_by(other_key, &self.issuer()?).map_err(bad)?;
        Ok(signed.pem())
    }
}

/// `cert`'s subject, attribute by attribute, each kept as the string type it was written in
/// (a chain is built by comparing names byte for byte).
fn name_of(cert: &X509Certificate<'_>) -> Result<DistinguishedName, Error> {
    use x509_parser::der_parser::asn1_rs::Tag;
    let mut name = DistinguishedName::new();
    for attr in cert.subject().iter_attributes() {
        let oid: Vec<u64> = (attr.attr_type().iter())
            .ok_or_else(|| "an attribute type too long".to_string())?
            .collect();
        let text = (attr.as_str())
            .map_err(|e| format!("a subject attribute: {e}"))?
            .to_string();
        let value = match attr.attr_value().tag() {
            Tag::PrintableString => DnValue::PrintableString(
                text.try_into()
                    .map_err(|e| format!("a printable string: {e}"))?,
            ),
            _ => DnValue::Utf8String(text),
        };
        name.push(DnType::from_oid(&oid), value);
    }
    Ok(name)
}

/// A real node's kubelet certificates, in the node's `DIR/pki` (`e2e/node/node prepare`):
/// - `ca.crt`: the kubelet's trust bundle, every CA it trusts, for the apiserver (its
///   kubeconfig's `certificate-authority`) and for its clients (`authentication.x509.clientCAFile`);
/// - `kubelet.crt`, `kubelet.key`: its client certificate (`O=system:nodes`,
///   `CN=system:node:NAME`), its kubeconfig's;
/// - `serving.crt`, `serving.key`: what it serves on its port (`tlsCertFile`,
///   `tlsPrivateKeyFile`).
pub struct KubeletPki {
    dir: PathBuf,
}

impl KubeletPki {
    /// The kubelet certificates in `dir`.
    pub fn at(dir: impl Into<PathBuf>) -> KubeletPki {
        KubeletPki { dir: dir.into() }
    }

    /// The trust bundle's path.
    pub fn bundle_path(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    /// The client certificate's path.
    pub fn client_path(&self) -> PathBuf {
        self.dir.join("kubelet.crt")
    }

    /// The serving certificate's path.
    pub fn serving_path(&self) -> PathBuf {
        self.dir.join("serving.crt")
    }

    /// Every CA of the trust bundle, DER, in order.
    pub fn trusted(&self) -> Result<Vec<Vec<u8>>, Error> {
        certificates(&read(&self.bundle_path())?)
    }

    /// The client certificate, DER.
    pub fn client(&self) -> Result<Vec<u8>, Error> {
        first(&self.client_path())
    }

    /// The serving certificate, DER.
    pub fn serving(&self) -> Result<Vec<u8>, Error> {
        first(&self.serving_path())
    }

    /// The trust bundle becomes `cas` (DER): the kubelet reads it again for its clients within
    /// a second (its `clientCAFile` is a dynamic CA bundle) and for the apiserver as it
    /// restarts, or within 5 minutes.
    pub fn set_trusted(&self, cas: &[Vec<u8>]) -> Result<(), Error> {
        let text: String = cas.iter().map(|d| certificate_pem(d)).collect();
        write(&self.bundle_path(), &text)
    }

    /// New client and serving certificates from `ca`, for the node the client certificate
    /// names now (`system:node:NAME`): the kubelet presents them once it restarts.
    pub fn issue(&self, ca: &Ca) -> Result<(), Error> {
        let cn = common_name(&self.client()?)?;
        let node = cn
            .strip_prefix("system:node:")
            .ok_or_else(|| format!("the client certificate names {cn}, not a node"))?;
        let (cert, key) = ca.issue(
            &[
                (DnType::OrganizationName, "system:nodes"),
                (DnType::CommonName, &cn),
            ],
            ExtendedKeyUsagePurpose::ClientAuth,
            &[],
        )?;
        write(&self.dir.join("kubelet.key"), &key)?;
        write(&self.client_path(), &cert)?;
        let (cert, key) = ca.issue(
            &[(DnType::CommonName, node)],
            ExtendedKeyUsagePurpose::ServerAuth,
            &["127.0.0.1", node],
        )?;
        write(&self.dir.join("serving.key"), &key)?;
        write(&self.serving_path(), &cert)
    }
}

/// The CAs placed on a host out of band (`DIR/host/ca` outside the node,
/// `/var/lib/stratum/ca` inside): for each, `HEX.crt` (its certificate, PEM) and `HEX.key`
/// (its key, PEM), HEX its fingerprint's digits. What `carotate stage` adds and `issue` signs
/// with; the rotation's driver names a CA by its fingerprint alone.
pub struct Keyring {
    dir: PathBuf,
}

impl Keyring {
    /// The keyring in `dir`.
    pub fn at(dir: impl Into<PathBuf>) -> Keyring {
        Keyring { dir: dir.into() }
    }

    fn path(&self, fingerprint: &str, ext: &str) -> PathBuf {
        let hex = fingerprint.strip_prefix("sha256:").unwrap_or(fingerprint);
        self.dir.join(format!("{hex}.{ext}"))
    }

    /// Places `ca`, its key with it.
    pub fn place(&self, ca: &Ca) -> Result<(), Error> {
        std::fs::create_dir_all(&self.dir).map_err(|e| format!("{}: {e}", self.dir.display()))?;
        let fp = ca.fingerprint();
        write(&self.path(&fp, "key"), &ca.key_pem())?;
        write(&self.path(&fp, "crt"), &ca.certificate_pem())
    }

    /// The certificate of CA `fingerprint` (DER), if placed here (and it is that CA).
    pub fn certificate(&self, fingerprint: &str) -> Result<Option<Vec<u8>>, Error> {
        let path = self.path(fingerprint, "crt");
        if !path.exists() {
            return Ok(None);
        }
        let der = first(&path)?;
        if self::fingerprint(&der) != fingerprint {
            return Err(format!("{} is not {fingerprint}", path.display()));
        }
        Ok(Some(der))
    }

    /// CA `fingerprint`, its key with it, if placed here.
    pub fn ca(&self, fingerprint: &str) -> Result<Option<Ca>, Error> {
        let (crt, key) = (self.path(fingerprint, "crt"), self.path(fingerprint, "key"));
        if !crt.exists() || !key.exists() {
            return Ok(None);
        }
        let ca = Ca::from_pem(&read(&crt)?, &read(&key)?)?;
        if ca.fingerprint() != fingerprint {
            return Err(format!("{} is not {fingerprint}", crt.display()));
        }
        Ok(Some(ca))
    }

    /// Every CA certificate placed here, DER.
    pub fn certificates(&self) -> Result<Vec<Vec<u8>>, Error> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Ok(Vec::new());
        };
        let mut ders = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "crt") {
                ders.push(first(&path)?);
            }
        }
        Ok(ders)
    }
}

fn first(path: &Path) -> Result<Vec<u8>, Error> {
    (certificates(&read(path)?)?.into_iter().next())
        .ok_or_else(|| format!("{}: no certificate", path.display()))
}

/// `path`'s text.
pub fn read(path: &Path) -> Result<String, Error> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// Writes `text` to `path` whole or not at all (a new file renamed over it), so a reader
/// (the kubelet, the apiserver) never sees half of it.
pub fn write(path: &Path, text: &str) -> Result<(), Error> {
    let mut new = path.as_os_str().to_owned();
    new.push(".new");
    let new = PathBuf::from(new);
    std::fs::write(&new, text)
        .and_then(|()| std::fs::rename(&new, path))
        .map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kubelet's certificates re-keyed from a new CA: the trust bundle as set, the leaves
    /// issued by the new CA (by name and key identifier), for the node the old ones named.
    #[test]
    fn a_kubelet_is_rekeyed_from_a_new_ca() -> Result<(), Error> {
        let dir = std::env::temp_dir().join(format!("nodejob-pki-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let (old, new) = (Ca::generate("old")?, Ca::generate("new")?);
        let (cert, key) = old.issue(
            &[
                (DnType::OrganizationName, "system:nodes"),
                (DnType::CommonName, "system:node:n1"),
            ],
            ExtendedKeyUsagePurpose::ClientAuth,
            &[],
        )?;
        write(&dir.join("kubelet.crt"), &cert)?;
        write(&dir.join("kubelet.key"), &key)?;
        let kubelet = KubeletPki::at(&dir);
        kubelet.set_trusted(&[old.der().to_vec()])?;
        let both = [old.der().to_vec(), new.der().to_vec()];
        assert_eq!(
            issuer_of(&kubelet.client()?, &both)?,
            Some(old.fingerprint())
        );
        kubelet.set_trusted(&both)?;
        kubelet.issue(&new)?;
        let trusted: Vec<String> = kubelet.trusted()?.iter().map(|d| fingerprint(d)).collect();
        assert_eq!(trusted, [old.fingerprint(), new.fingerprint()]);
        assert_eq!(
            issuer_of(&kubelet.client()?, &both)?,
            Some(new.fingerprint())
        );
        assert_eq!(
            issuer_of(&kubelet.serving()?, &both)?,
            Some(new.fingerprint())
        );
        assert_eq!(common_name(&kubelet.client()?)?, "system:node:n1");
        assert_eq!(common_name(&kubelet.serving()?)?, "n1");
        let keyring = Keyring::at(dir.join("ca"));
        assert!(keyring.ca(&new.fingerprint())?.is_none());
        keyring.place(&new)?;
        let placed = keyring.ca(&new.fingerprint())?.map(|c| c.fingerprint());
        assert_eq!(placed, Some(new.fingerprint()));
        let _ = std::fs::remove_dir_all(&dir);
        Ok(())
    }
}
