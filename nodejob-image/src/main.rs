//! `nodejob-image`: writes the controller's container image (see the library's docs).
//!
//! ```text
//! nodejob-image [--binary target/release/nodejob] [--reference nodejob:0.1.0] --out FILE
//! ```
//!
//! Prints the image's reference and digest; exits 2 on a usage error, 1 when the image could
//! not be made. `deploy/image/build` builds the binary and runs this.

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: nodejob-image [--binary PATH] [--reference NAME:TAG] --out FILE

Writes an OCI image layout tarball of the nodejob binary (default target/release/nodejob)
and the shared libraries it loads, named NAME:TAG (default nodejob:VERSION). Push it with
`skopeo copy oci-archive:FILE docker://REGISTRY/nodejob:TAG`, or import it into a node's
containerd with `ctr -n k8s.io images import FILE`.";

fn main() -> ExitCode {
    let mut binary = PathBuf::from("target/release/nodejob");
    let mut reference = format!("nodejob:{}", env!("CARGO_PKG_VERSION"));
    let mut out = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = match arg.as_str() {
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            "--binary" | "--reference" | "--out" => args.next(),
            other => {
                eprintln!("nodejob-image: unknown argument {other:?}\n\n{USAGE}");
                return ExitCode::from(2);
            }
        };
        let Some(value) = value else {
            eprintln!("nodejob-image: {arg} needs a value\n\n{USAGE}");
            return ExitCode::from(2);
        };
        match arg.as_str() {
            "--binary" => binary = value.into(),
            "--reference" => reference = value,
            _ => out = Some(PathBuf::from(value)),
        }
    }
    let Some(out) = out else {
        eprintln!("nodejob-image: --out is required\n\n{USAGE}");
        return ExitCode::from(2);
    };
    let made = nodejob_image::libraries(&binary)
        .and_then(|libraries| nodejob_image::write(&binary, &libraries, &reference, &out));
    match made {
        Ok(image) => {
            println!("image={}", image.reference);
            println!("digest={}", image.digest);
            println!("id={}", image.id);
            println!("file={}", out.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!(
                "nodejob-image: could not make the image of {}: {e}",
                binary.display()
            );
            ExitCode::FAILURE
        }
    }
}
