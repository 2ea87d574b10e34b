//! The image is a valid OCI image layout whose blobs are what its index and manifest say,
//! holding the binary and every library its loader needs, the same bytes each time.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use nodejob_image::{BINARY_PATH, libraries, normalised, write};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// A real dynamically linked binary of this build: the image tool itself.
const BINARY: &str = env!("CARGO_BIN_EXE_nodejob-image");

fn sha256(data: &[u8]) -> String {
    let hex: String = Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

/// The regular files of a tar, by path.
fn files(tar: &[u8]) -> BTreeMap<String, Vec<u8>> {
    let mut archive = tar::Archive::new(tar);
    let mut files = BTreeMap::new();
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let header = entry.header().clone();
        assert_eq!(header.mtime().unwrap(), 0, "{:?}", entry.path());
        assert_eq!((header.uid().unwrap(), header.gid().unwrap()), (0, 0));
        if header.entry_type().is_file() {
            let path = entry.path().unwrap().to_string_lossy().into_owned();
            let mut data = Vec::new();
            entry.read_to_end(&mut data).unwrap();
            files.insert(path, data);
        }
    }
    files
}

fn json(data: &[u8]) -> Value {
    serde_json::from_slice(data).unwrap()
}

fn made(dir: &Path, name: &str) -> (nodejob_image::Image, Vec<u8>) {
    let out = dir.join(name);
    let libs = libraries(Path::new(BINARY)).unwrap();
    let image = write(Path::new(BINARY), &libs, "nodejob:0.1.0", &out).unwrap();
    (image, std::fs::read(out).unwrap())
}

/// A directory of the test `name`'s own.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("nodejob-image-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn the_image_is_a_layout_whose_blobs_are_what_its_index_and_manifest_say() {
    let dir = scratch("layout");
    let (image, bytes) = made(&dir, "image.tar");
    let layout = files(&bytes);
    assert_eq!(
        json(&layout["oci-layout"]),
        serde_json::json!({"imageLayoutVersion": "1.0.0"})
    );
    // Every blob is named by its digest.
    for (path, data) in &layout {
        if let Some(hex) = path.strip_prefix("blobs/sha256/") {
            assert_eq!(sha256(data), format!("sha256:{hex}"), "{path}");
        }
    }
    let blob = |digest: &str| &layout[&digest.replace("sha256:", "blobs/sha256/")];
    let index = json(&layout["index.json"]);
    let entry = &index["manifests"][0];
    assert_eq!(entry["digest"], image.digest);
    let annotations = &entry["annotations"];
    assert_eq!(
        annotations["io.containerd.image.name"],
        "docker.io/library/nodejob:0.1.0"
    );
    assert_eq!(annotations["org.opencontainers.image.ref.name"], "0.1.0");
    let manifest_bytes = blob(&image.digest);
    assert_eq!(entry["size"], manifest_bytes.len());
    let manifest = json(manifest_bytes);
    let config_entry = &manifest["config"];
    let config_bytes = blob(config_entry["digest"].as_str().unwrap());
    assert_eq!(config_entry["digest"], image.id);
    assert_eq!(config_entry["size"], config_bytes.len());
    let config = json(config_bytes);
    let layer_entry = &manifest["layers"][0];
    let layer = blob(layer_entry["digest"].as_str().unwrap());
    assert_eq!(layer_entry["size"], layer.len());
    assert_eq!(
        layer_entry["mediaType"],
        "application/vnd.oci.image.layer.v1.tar"
    );
    // An uncompressed layer's diff ID is its digest.
    assert_eq!(config["rootfs"]["diff_ids"][0], layer_entry["digest"]);
    assert_eq!(
        config["config"]["Entrypoint"],
        serde_json::json!(["/usr/local/bin/nodejob"])
    );
    assert_eq!(config["config"]["Cmd"], serde_json::json!(["controller"]));
    assert_eq!(config["config"]["User"], "65532:65532");

    // The layer: the binary, byte for byte, and each library at the path it was found at.
    let inside = files(layer);
    assert_eq!(inside[BINARY_PATH], std::fs::read(BINARY).unwrap());
    let libs = libraries(Path::new(BINARY)).unwrap();
    assert!(
        libs.iter()
            .any(|l| l.to_string_lossy().contains("ld-linux")),
        "a dynamically linked binary names its loader: {libs:?}"
    );
    assert!(libs.iter().any(|l| l.to_string_lossy().contains("libc.so")));
    for lib in &libs {
        let path = lib.to_string_lossy().trim_start_matches('/').to_string();
        assert_eq!(inside[&path], std::fs::read(lib).unwrap(), "{path}");
    }
    assert_eq!(inside.len(), libs.len() + 1, "{:?}", inside.keys());
    assert_eq!(
        image.files,
        inside.keys().cloned().collect::<Vec<_>>(),
        "the files the image says it holds"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn the_same_binary_makes_the_same_bytes() {
    let dir = scratch("twice");
    let (first, a) = made(&dir, "a.tar");
    let (second, b) = made(&dir, "b.tar");
    assert_eq!(first, second);
    assert!(a == b, "two builds of one binary differ");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_reference_is_named_as_a_container_runtime_normalises_it() {
    for (given, said) in [
        ("nodejob:0.1.0", "docker.io/library/nodejob:0.1.0"),
        ("nodejob", "docker.io/library/nodejob:latest"),
        ("team/nodejob:1", "docker.io/team/nodejob:1"),
        (
            "registry.example.com/team/nodejob:1",
            "registry.example.com/team/nodejob:1",
        ),
        ("localhost:5000/nodejob", "localhost:5000/nodejob:latest"),
        ("localhost/nodejob:2", "localhost/nodejob:2"),
        (
            "nodejob@sha256:0123",
            "docker.io/library/nodejob@sha256:0123",
        ),
    ] {
        assert_eq!(normalised(given), said, "{given}");
    }
}

#[test]
fn a_binary_that_is_not_there_is_an_error_naming_it() {
    let missing = Path::new("/nonexistent/nodejob");
    let dir = scratch("missing");
    let err = write(missing, &[], "nodejob:0.1.0", &dir.join("x.tar")).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound, "{err}");
    std::fs::remove_dir_all(dir).unwrap();
}
