//! The controller's container image, made from a built `nodejob` binary with no registry and
//! no container engine: an [OCI image layout] in one tarball, which `ctr images import`,
//! `skopeo copy oci-archive:...` and `crane push` read.
//!
//! The image is one layer: the binary at [`BINARY_PATH`], and each shared library its dynamic
//! loader resolves (as `ldd` lists them, the loader itself included) at the path it was found
//! at, copied as a regular file. Nothing else: no shell, no package manager, no certificates
//! (the controller trusts the cluster's CA, mounted by the kubelet). It runs as the
//! unprivileged user 65532, with `nodejob controller` as its command. The same binary and
//! libraries give the same bytes (every timestamp and owner zero, the entries sorted), so the
//! image's digest names the build.
//!
//! [OCI image layout]: https://github.com/opencontainers/image-spec/blob/main/image-layout.md

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;
use sha2::{Digest, Sha256};

/// Where the binary is in the image.
pub const BINARY_PATH: &str = "usr/local/bin/nodejob";

/// The user the image runs as (distroless's `nonroot`).
pub const USER: &str = "65532:65532";

/// The media types of the OCI image specification.
const INDEX: &str = "application/vnd.oci.image.index.v1+json";
const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const CONFIG: &str = "application/vnd.oci.image.config.v1+json";
const LAYER: &str = "application/vnd.oci.image.layer.v1.tar";

/// What went into an image, and its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    /// The reference it is named by, as a container runtime normalises it
    /// (`docker.io/library/nodejob:0.1.0`).
    pub reference: String,
    /// The digest of its manifest (`sha256:...`): `REPOSITORY@DIGEST` pins it.
    pub digest: String,
    /// Its ID, the digest of its config: what a container runtime reports as a container's
    /// `imageID` for an image it has by no repository digest.
    pub id: String,
    /// The files of its layer, by their path in the image.
    pub files: Vec<String>,
}

/// A reference as a container runtime normalises it: a name with no registry is Docker Hub's
/// (`docker.io`), a Docker Hub name with no namespace is in `library`, and no tag is `latest`
/// (containerd's `reference/docker.ParseNormalizedNamed`).
pub fn normalised(reference: &str) -> String {
    let (name, suffix) = match reference.split_once('@') {
        Some((name, digest)) => (name, format!("@{digest}")),
        None => {
            let base = reference.rfind('/').map_or(0, |i| i + 1);
            match reference[base..].rfind(':') {
                Some(i) => (
                    &reference[..base + i],
                    format!(":{}", &reference[base + i + 1..]),
                ),
                None => (reference, ":latest".to_string()),
            }
        }
    };
    let first = name.split('/').next().unwrap_or(name);
    let has_registry =
        name.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    let name = if has_registry {
        name.to_string()
    } else if name.contains('/') {
        format!("docker.io/{name}")
    } else {
        format!("docker.io/library/{name}")
    };
    format!("{name}{suffix}")
}

/// The shared libraries `binary` loads, the dynamic loader first, as `ldd` resolves them on
/// this machine; none for a static binary.
///
/// # Errors
/// `ldd` could not be run, or named a library it did not find.
pub fn libraries(binary: &Path) -> io::Result<Vec<PathBuf>> {
    let out = Command::new("ldd").arg(binary).output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        // `ldd` of a static binary says so and exits 1.
        let said = format!("{text}{}", String::from_utf8_lossy(&out.stderr));
        if said.contains("not a dynamic executable") || said.contains("statically linked") {
            return Ok(Vec::new());
        }
        return Err(io::Error::other(format!(
            "ldd {}: {}",
            binary.display(),
            said.trim()
        )));
    }
    let mut libraries = Vec::new();
    for line in text.lines().map(str::trim) {
        // `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)`, `/lib64/ld-linux-x86-64.so.2
        // (0x...)`, `linux-vdso.so.1 (0x...)` (the kernel's, no file).
        let path = match line.split_once("=>") {
            Some((name, _)) if line.contains("not found") => {
                return Err(io::Error::other(format!(
                    "{}: its library {} is not found on this machine",
                    binary.display(),
                    name.trim()
                )));
            }
            Some((_, resolved)) => resolved.trim(),
            None => line,
        };
        let path = path.split(" (").next().unwrap_or(path).trim();
        if path.starts_with('/') {
            libraries.push(PathBuf::from(path));
        }
    }
    // The loader (named without `=>`) first, then the libraries in the order `ldd` gave.
    libraries.sort_by_key(|p| !p.to_string_lossy().contains("ld-linux"));
    Ok(libraries)
}

fn sha256(data: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let hex: String = (Sha256::digest(data).iter())
        .flat_map(|b| [HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xf)]])
        .map(char::from)
        .collect();
    format!("sha256:{hex}")
}

/// An uncompressed tar of `entries` (path in the image, bytes, mode), parent directories
/// included, every owner and time zero, in path order.
fn tar(entries: &BTreeMap<String, (Vec<u8>, u32)>) -> io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    let mut dirs = std::collections::BTreeSet::new();
    for path in entries.keys() {
        let mut at = Path::new(path).parent();
        while let Some(dir) = at.filter(|d| !d.as_os_str().is_empty()) {
            dirs.insert(dir.to_string_lossy().into_owned());
            at = dir.parent();
        }
    }
    let header = |kind: tar::EntryType, size: u64, mode: u32| {
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(kind);
        h.set_size(size);
        h.set_mode(mode);
        h.set_mtime(0);
        h.set_uid(0);
        h.set_gid(0);
        h
    };
    for dir in &dirs {
        let mut h = header(tar::EntryType::Directory, 0, 0o755);
        builder.append_data(&mut h, format!("{dir}/"), io::empty())?;
    }
    for (path, (data, mode)) in entries {
        let mut h = header(tar::EntryType::Regular, data.len() as u64, *mode);
        builder.append_data(&mut h, path, data.as_slice())?;
    }
    builder.into_inner()
}

/// Writes the image of `binary` (and `libraries`, at their paths) to `out`, one OCI image
/// layout tarball named `reference`.
///
/// # Errors
/// A file could not be read, or `out` written.
pub fn write(
    binary: &Path,
    libraries: &[PathBuf],
    reference: &str,
    out: &Path,
) -> io::Result<Image> {
    let mut entries = BTreeMap::new();
    entries.insert(BINARY_PATH.to_string(), (std::fs::read(binary)?, 0o755));
    for library in libraries {
        // Read through any symlink: the file is at the path the loader looks for.
        let data = std::fs::read(library)?;
        let path = library
            .to_string_lossy()
            .trim_start_matches('/')
            .to_string();
        entries.insert(path, (data, 0o755));
    }
    let files: Vec<String> = entries.keys().cloned().collect();
    let layer = tar(&entries)?;
    let reference = normalised(reference);
    let config = json!({
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "User": USER,
            "Entrypoint": [format!("/{BINARY_PATH}")],
            "Cmd": ["controller"],
            "Env": ["PATH=/usr/local/bin:/usr/bin:/bin"],
            "Labels": {
                "org.opencontainers.image.title": "nodejob",
                "org.opencontainers.image.description":
                    "nodejob controller: declarative rolling upgrades and CA rotations",
                "org.opencontainers.image.version": env!("CARGO_PKG_VERSION"),
            },
        },
        "rootfs": {"type": "layers", "diff_ids": [sha256(&layer)]},
        "history": [{"created_by": "nodejob-image", "comment": "the nodejob binary and its libraries"}],
    });
    let config = serde_json::to_vec(&config).map_err(io::Error::other)?;
    let id = sha256(&config);
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": {"mediaType": CONFIG, "digest": sha256(&config), "size": config.len()},
        "layers": [{"mediaType": LAYER, "digest": sha256(&layer), "size": layer.len()}],
    });
    let manifest = serde_json::to_vec(&manifest).map_err(io::Error::other)?;
    let digest = sha256(&manifest);
    // `io.containerd.image.name` is the name `ctr images import` gives it (the kubelet finds
    // it by the normalised reference); `org.opencontainers.image.ref.name`, the tag, is what
    // `skopeo copy oci-archive:FILE:TAG` selects.
    let tag = match reference.rsplit_once(':') {
        Some((name, tag)) if !reference.contains('@') && !tag.contains('/') && !name.is_empty() => {
            tag
        }
        _ => "latest",
    };
    let index = json!({
        "schemaVersion": 2,
        "mediaType": INDEX,
        "manifests": [{
            "mediaType": MANIFEST,
            "digest": digest,
            "size": manifest.len(),
            "platform": {"architecture": "amd64", "os": "linux"},
            "annotations": {
                "io.containerd.image.name": reference,
                "org.opencontainers.image.ref.name": tag,
            },
        }],
    });
    let index = serde_json::to_vec(&index).map_err(io::Error::other)?;
    let mut layout = BTreeMap::new();
    layout.insert(
        "oci-layout".to_string(),
        (br#"{"imageLayoutVersion":"1.0.0"}"#.to_vec(), 0o644),
    );
    layout.insert("index.json".to_string(), (index, 0o644));
    for blob in [layer, config, manifest] {
        let name = sha256(&blob).replace("sha256:", "blobs/sha256/");
        layout.insert(name, (blob, 0o644));
    }
    std::fs::write(out, tar(&layout)?)?;
    Ok(Image {
        reference,
        digest,
        id,
        files,
    })
}
