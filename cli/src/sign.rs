//! `mfc keygen` and `mfc sign`: Ed25519 keys and signed blobs (`formats/SPEC.md`, "Signed
//! blobs"); devices verify with `mfc_runtime::signature` against the public key.

use std::path::{Path, PathBuf};

use mfc_compiler::Error;
use mfc_compiler::ship::signing;

use crate::options;

/// Make an Ed25519 key pair: the secret seed in KEY (mode 0600), the public key in KEY.pub.
#[derive(clap::Args)]
pub struct KeygenArgs {
    /// Where to write the secret key (refused if it exists); the public key goes to KEY.pub.
    #[arg(long, value_parser = options::out_path)]
    out: PathBuf,
}

/// Sign a blob with a secret key from `mfc keygen`: the blob followed by the signature trailer.
#[derive(clap::Args)]
pub struct SignArgs {
    /// The .mfc blob to sign.
    #[arg(value_parser = options::in_path)]
    blob: PathBuf,
    /// The secret key written by `mfc keygen`.
    #[arg(long, value_parser = options::in_path)]
    key: PathBuf,
    /// Where to write the signed blob.
    #[arg(long, value_parser = options::out_path)]
    out: PathBuf,
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| {
        Error::Io(std::io::Error::new(
            e.kind(),
            format!("{}: {e}", path.display()),
        ))
    }
}

/// Reads a 32-byte key (64 hexadecimal digits) from `path`, for the option `option`.
pub fn read_key(path: &Path, option: &str) -> Result<[u8; 32], Error> {
    let text = std::fs::read_to_string(path).map_err(io(path))?;
    signing::from_hex(&text, &format!("{option} {}", path.display()))
}

pub fn keygen(args: KeygenArgs) -> Result<(), Box<dyn std::error::Error>> {
    let public = PathBuf::from(format!("{}.pub", args.out.display()));
    for path in [&args.out, &public] {
        if path.exists() {
            return Err(crate::options::Refusal(format!(
                "--out {}: {} exists (keys are never overwritten)",
                args.out.display(),
                path.display()
            ))
            .into());
        }
    }
    let (seed, key) = signing::keygen()?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&args.out).map_err(io(&args.out))?;
    std::io::Write::write_all(
        &mut file,
        format!("{}\n", signing::to_hex(&seed)).as_bytes(),
    )
    .map_err(io(&args.out))?;
    std::fs::write(&public, format!("{}\n", signing::to_hex(&key))).map_err(io(&public))?;
    println!(
        "secret key -> {} (keep it secret)\npublic key -> {} ({})",
        args.out.display(),
        public.display(),
        signing::to_hex(&key)
    );
    Ok(())
}

pub fn sign(args: SignArgs) -> Result<(), Box<dyn std::error::Error>> {
    let blob = std::fs::read(&args.blob).map_err(io(&args.blob))?;
    let seed = read_key(&args.key, "--key")?;
    let signed = signing::sign(&blob, &seed).map_err(|e| match e {
        Error::Blob(error) => Error::BlobFile {
            path: args.blob.display().to_string(),
            error,
        },
        other => other,
    })?;
    std::fs::write(&args.out, &signed).map_err(io(&args.out))?;
    println!(
        "signed {} bytes with public key {} -> {} ({} bytes)",
        blob.len(),
        signing::to_hex(&signing::public_key(&seed)),
        args.out.display(),
        signed.len()
    );
    Ok(())
}

/// Opens blob bytes read from `path`: a signed blob needs `public_key` and its signature must
/// verify (`mfc_runtime::signature`); an unsigned one is refused when a key is given (the caller
/// asked for a signature). Returns the mechanism, the blob's bytes without the trailer, and
/// the signature's status in words.
pub fn open<'a>(
    bytes: &'a [u8],
    path: &Path,
    public_key: Option<&Path>,
) -> Result<(mfc_runtime::Validated<'a>, &'a [u8], String), Box<dyn std::error::Error>> {
    let refused = |e: mfc_runtime::Error| format!("{}: {e}", path.display());
    let signed = mfc_formats::signature::split_signed(bytes);
    match (signed, public_key) {
        (Some(signed), Some(key_path)) => {
            let key = read_key(key_path, "--public-key")?;
            let m = mfc_runtime::signature::from_signed_bytes(bytes, &key).map_err(refused)?;
            Ok((
                m,
                signed.blob,
                format!(
                    "valid Ed25519 signature, public key {}",
                    signing::to_hex(&key)
                ),
            ))
        }
        (Some(_), None) => Err(format!(
            "{}: the blob is signed: give --public-key KEY.pub to check its signature",
            path.display()
        )
        .into()),
        (None, Some(_)) => Err(refused(mfc_runtime::Error::NotSigned).into()),
        (None, None) => {
            let m = mfc_formats::Mechanism::from_bytes(bytes).map_err(|error| Error::BlobFile {
                path: path.display().to_string(),
                error,
            })?;
            Ok((m, bytes, "none".to_string()))
        }
    }
}
