//! The image of a node Job: the default one, and the rule that an image is pinned by digest.
//! A leaf: the spec (which checks an image) and the Job builder (which uses one) both read it.

/// The default image: contains `nsenter`, pinned by digest.
pub const IMAGE: &str = "docker.io/library/alpine:3.22@sha256:14358309a308569c32bdc37e2e0e9694be33a9d99e68afb0f5ff33cc1f695dce";

/// Whether `image` is pinned by digest: `<reference>@sha256:<64 lowercase hex digits>`, so the
/// privileged pod runs exactly the bytes that were reviewed, whatever a tag points at now.
pub(crate) fn is_digest_pinned(image: &str) -> bool {
    let Some((reference, digest)) = image.rsplit_once('@') else {
        return false;
    };
    let Some(hex) = digest.strip_prefix("sha256:") else {
        return false;
    };
    !reference.is_empty()
        && !reference.contains(char::is_whitespace)
        && hex.len() == 64
        && hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}
