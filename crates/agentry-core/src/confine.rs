//! Which host files a tool may touch, for tools that take paths from requests (the data
//! agent's sources, the PPT agent's pictures, file names of what they write). A request comes
//! from whoever can reach the agent, so a path is checked after symlinks are resolved, refusals
//! say nothing about whether a path exists, and reads are capped and kept off the async workers.
//!
//! ```
//! use agentry_core::confine::{Folders, file_stem};
//!
//! let mut folders = Folders::default();
//! assert!(folders.resolve("/etc/passwd").is_none(), "nothing is readable by default");
//! folders.allow(&std::env::temp_dir()).unwrap();
//! assert!(folders.resolve("../etc/passwd").is_none(), "no way out of an allowed folder");
//! assert_eq!(file_stem("Q3 results: draft/../v2"), "q3-results-draft-v2");
//! ```

use std::path::{Component, Path, PathBuf};

/// Allowed folders minus denied paths; empty (nothing readable) by default.
#[derive(Debug, Clone, Default)]
pub struct Folders {
    /// Canonical.
    allowed: Vec<PathBuf>,
    /// Canonical where they exist, absolute otherwise.
    denied: Vec<PathBuf>,
}

impl Folders {
    /// Allows `folder` (it must exist and be a folder).
    pub fn allow(&mut self, folder: &Path) -> std::io::Result<()> {
        let canonical = folder.canonicalize()?;
        if !canonical.is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotADirectory,
                "not a folder",
            ));
        }
        self.allowed.push(canonical);
        Ok(())
    }

    /// Never anything under `path`, even inside an allowed folder.
    pub fn deny(&mut self, path: &Path) {
        self.denied.push(
            path.canonicalize()
                .unwrap_or_else(|_| std::path::absolute(path).unwrap_or_else(|_| path.into())),
        );
    }

    /// Whether no folder is allowed (nothing is readable).
    pub fn is_empty(&self) -> bool {
        self.allowed.is_empty()
    }

    /// Inside an allowed folder and outside every denied path (`real` is canonical).
    pub fn contains(&self, real: &Path) -> bool {
        self.allowed.iter().any(|f| real.starts_with(f))
            && !self.denied.iter().any(|d| real.starts_with(d))
    }

    /// The canonical path `location` names, if it is allowed: a relative path is taken from
    /// each allowed folder in turn (and may not use `..`), an absolute one must resolve inside
    /// one. `None` says nothing about whether the path exists.
    pub fn resolve(&self, location: &str) -> Option<PathBuf> {
        if location.is_empty() || location.contains('\0') {
            return None;
        }
        let asked = Path::new(location);
        if asked.is_relative()
            && asked
                .components()
                .any(|c| matches!(c, Component::ParentDir))
        {
            return None;
        }
        self.allowed.iter().find_map(|folder| {
            let candidate = if asked.is_absolute() {
                asked.to_path_buf()
            } else {
                folder.join(asked)
            };
            let real = candidate.canonicalize().ok()?;
            self.contains(&real).then_some(real)
        })
    }

    /// `message` with the allowed folders' host paths removed (engines quote the files they
    /// read in their errors).
    pub fn redact(&self, message: &str) -> String {
        let mut m = message.to_owned();
        for f in &self.allowed {
            let f = f.display().to_string();
            m = m.replace(&format!("{f}/"), "").replace(&f, ".");
        }
        m
    }
}

/// Reads a regular file of at most `max` bytes, off the async workers. A FIFO, a device or a
/// file that grows past `max` is refused rather than read without end.
pub async fn read_capped(path: PathBuf, max: u64) -> std::io::Result<Vec<u8>> {
    tokio::task::spawn_blocking(move || {
        use std::io::Read;
        // Checked before opening: opening a FIFO for reading blocks until a writer comes.
        if !std::fs::metadata(&path)?.is_file() {
            return Err(std::io::Error::other("not a regular file"));
        }
        let f = std::fs::File::open(&path)?;
        let meta = f.metadata()?;
        if !meta.is_file() {
            return Err(std::io::Error::other("not a regular file"));
        }
        if meta.len() > max {
            return Err(std::io::Error::other(format!("larger than {max} bytes")));
        }
        let mut buf = Vec::with_capacity(meta.len() as usize);
        f.take(max + 1).read_to_end(&mut buf)?;
        if buf.len() as u64 > max {
            return Err(std::io::Error::other(format!("larger than {max} bytes")));
        }
        Ok(buf)
    })
    .await
    .map_err(std::io::Error::other)?
}

/// Names tried for one file before giving up (`deck.pptx`, `deck-2.pptx`, ...).
const MAX_NAME_TRIES: usize = 1000;

/// Writes `bytes` into `dir` under the plain file name `name` (replacing what is there when
/// `replace`), else under the first free `stem-2.ext`, `stem-3.ext`, ..., and returns the
/// name used. For what an agent writes for its callers: one client's file is never replaced
/// by another's under the same name, and no host path is returned. A reader never sees half a
/// file: the bytes go to a fresh temporary file (created exclusively, so a planted symlink is
/// not followed), which is then renamed over `name`, or hard-linked to the first name not
/// taken (a link, unlike a rename, fails instead of replacing). Blocking: call it off the
/// async workers.
pub fn write_new(dir: &Path, name: &str, bytes: &[u8], replace: bool) -> std::io::Result<String> {
    use std::io::{ErrorKind, Write};
    use std::sync::atomic::{AtomicU64, Ordering};
    static TEMPORARY: AtomicU64 = AtomicU64::new(0);
    std::fs::create_dir_all(dir)?;
    let n = TEMPORARY.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = dir.join(format!(".{name}.{}-{n}-{nanos}.part", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut f| f.write_all(bytes).and_then(|_| f.sync_all()));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    if replace {
        return match std::fs::rename(&tmp, dir.join(name)) {
            Ok(()) => Ok(name.to_owned()),
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                Err(e)
            }
        };
    }
    let (stem, ext) = match name.rfind('.') {
        Some(i) if i > 0 => name.split_at(i),
        _ => (name, ""),
    };
    let mut result = Err(std::io::Error::new(
        ErrorKind::AlreadyExists,
        format!("{MAX_NAME_TRIES} files named {stem}-N{ext} exist already"),
    ));
    for n in 1..=MAX_NAME_TRIES {
        let candidate = if n == 1 {
            name.to_owned()
        } else {
            format!("{stem}-{n}{ext}")
        };
        match std::fs::hard_link(&tmp, dir.join(&candidate)) {
            Ok(()) => {
                result = Ok(candidate);
                break;
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            // A file system without hard links: an exclusive create is still no-clobber,
            // only not atomic for readers.
            Err(_) => match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(dir.join(&candidate))
            {
                Ok(mut f) => {
                    result = f.write_all(bytes).map(|_| candidate);
                    break;
                }
                Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            },
        }
    }
    let _ = std::fs::remove_file(&tmp);
    result
}

/// A file-name-safe stem from a title: lower-case letters, digits and `-`, at most 60
/// characters, `presentation` when nothing is left. No separators, so no way out of a folder.
pub fn file_stem(title: &str) -> String {
    let s: String = title
        .chars()
        .map(|c| {
            if c.is_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let s = s
        .split('-')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    if s.is_empty() {
        "presentation".into()
    } else {
        s.chars().take(60).collect()
    }
}
