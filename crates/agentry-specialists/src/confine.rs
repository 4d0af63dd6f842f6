//! Folders a specialist may read from, checked after symlinks are resolved. Shared by the data
//! agent's sources and the PPT agent's pictures: both take paths from requests.

use std::path::{Component, Path, PathBuf};

/// Allowed folders minus denied paths; empty (nothing readable) by default.
#[derive(Debug, Clone, Default)]
pub(crate) struct Folders {
    /// Canonical.
    allowed: Vec<PathBuf>,
    /// Canonical where they exist, absolute otherwise.
    denied: Vec<PathBuf>,
}

impl Folders {
    /// Allows `folder` (it must exist and be a folder).
    pub(crate) fn allow(&mut self, folder: &Path) -> std::io::Result<()> {
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
    pub(crate) fn deny(&mut self, path: &Path) {
        self.denied.push(
            path.canonicalize()
                .unwrap_or_else(|_| std::path::absolute(path).unwrap_or_else(|_| path.into())),
        );
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.allowed.is_empty()
    }

    /// Inside an allowed folder and outside every denied path (`real` is canonical).
    pub(crate) fn contains(&self, real: &Path) -> bool {
        self.allowed.iter().any(|f| real.starts_with(f))
            && !self.denied.iter().any(|d| real.starts_with(d))
    }

    /// The canonical path `location` names, if it is allowed: a relative path is taken from
    /// each allowed folder in turn (and may not use `..`), an absolute one must resolve inside
    /// one. `None` says nothing about whether the path exists.
    pub(crate) fn resolve(&self, location: &str) -> Option<PathBuf> {
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
    pub(crate) fn redact(&self, message: &str) -> String {
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
pub(crate) async fn read_capped(path: PathBuf, max: u64) -> std::io::Result<Vec<u8>> {
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
