//! The knowledge base: one SQLite file holding collections, documents, chunks, a BM25 index
//! (FTS5) and the chunks' vectors (sqlite-vec), so retrieval needs no server and a copy of one
//! file moves a whole knowledge base.
//!
//! Search is hybrid: the vector index and the keyword index each rank the chunks, and the two
//! rankings are fused by reciprocal rank (`1 / (60 + rank)` summed), which needs no score
//! calibration between the two.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Once};

use agentry_core::embed::DynEmbedder;
use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};

use super::RagError;
use super::chunk::chunk;
use super::keywords::{KeywordIndex, KeywordIndexBuilder};
use super::parse::{Format, parse};
use super::vectors::VectorIndex;

/// Reciprocal-rank-fusion constant (the usual 60).
const RRF_K: f64 = 60.0;
/// Bytes per chunk: about 180 MiniLM tokens of English, under its 256-token window.
pub const CHUNK_BYTES: usize = 700;
/// Files larger than this are skipped with a reason.
const MAX_FILE_BYTES: u64 = 64 << 20;
/// Texts per embedding call (and progress report): large enough for the embedder to batch
/// texts of similar length together (padding is wasted work), small enough for a live bar.
const EMBED_BATCH: usize = 128;

/// A retrieved chunk and where it comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hit {
    /// The chunk's id in the knowledge base.
    pub chunk_id: i64,
    /// File name of the document.
    pub document: String,
    /// Title of the document (from its first heading, else its file name).
    pub title: String,
    /// Path of the document as ingested.
    pub path: String,
    /// The section the chunk is in.
    pub section: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// The page, for paged documents.
    pub page: Option<u32>,
    /// Byte offsets of the chunk in the document's text.
    pub start: usize,
    /// End of the byte range.
    pub end: usize,
    /// The chunk's text.
    pub text: String,
    /// Fused score (higher is better).
    pub score: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// Its rank by vector similarity, when it was among those hits.
    pub vector_rank: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// Its rank by keyword match (BM25), when it was among those hits.
    pub keyword_rank: Option<usize>,
}

/// How an ingestion went, file by file.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct IngestReport {
    /// The collection ingested into.
    pub collection: String,
    /// Files looked at.
    pub files_seen: usize,
    /// Files ingested (new or changed).
    pub ingested: Vec<String>,
    /// Files already ingested as they are.
    pub unchanged: Vec<String>,
    /// Files not ingested, with the reason (unsupported type, unreadable, too large...).
    pub skipped: Vec<(String, String)>,
    /// Chunks written.
    pub chunks: usize,
    /// Chunks embedded: a changed file's chunks whose text and section are as stored keep
    /// their vectors (an edit to one page re-embeds that page, not the document).
    pub embedded: usize,
}

/// Ingestion progress, for a progress bar.
#[derive(Debug, Clone)]
pub struct Progress {
    /// The file being ingested.
    pub file: String,
    /// Its position (from 1).
    pub file_index: usize,
    /// Files in all.
    pub files: usize,
    /// Chunks embedded so far in this file.
    pub chunks_done: usize,
    /// Chunks in this file.
    pub chunks_total: usize,
}

/// A collection and what it holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CollectionInfo {
    /// Its name.
    pub name: String,
    /// The embedder its vectors come from.
    pub embedder: String,
    /// Length of its vectors.
    pub dimensions: usize,
    /// Documents in it.
    pub documents: usize,
    /// Chunks in it.
    pub chunks: usize,
}

/// A knowledge base on one SQLite file; clones share the connection.
#[derive(Clone)]
pub struct KnowledgeBase {
    conn: Arc<Mutex<Connection>>,
    embedder: Arc<dyn DynEmbedder>,
    embedder_id: String,
    indexes: Arc<Mutex<IndexCache>>,
    search_mode: SearchMode,
}

/// One file as ingest read it.
enum Read {
    Skipped(String),
    Unchanged,
    Changed {
        key: String,
        hash: String,
        bytes: usize,
        doc: super::parse::Parsed,
    },
}

/// Where the two rankings of a hybrid search are computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SearchMode {
    /// In-memory copies of each collection's vectors ([`VectorIndex`], 4 bytes x dimensions
    /// per chunk) and keyword index ([`KeywordIndex`], about 8 bytes per distinct word of a
    /// chunk), built from the SQLite tables on the first search: the fast default.
    #[default]
    Memory,
    /// sqlite-vec's scan and FTS5's `bm25()`: no memory held, slower on large collections.
    /// `AGENTRY_RAG_SEARCH=sqlite` selects it.
    Sqlite,
}

/// One collection's in-memory indexes.
#[derive(Debug)]
struct CollectionIndex {
    vectors: VectorIndex,
    keywords: KeywordIndex,
}

/// The in-memory indexes of the collections, valid while the database is unchanged: our own
/// writes clear them, and SQLite's `data_version` tells when another connection (another
/// `agentry ingest`) committed.
#[derive(Default)]
struct IndexCache {
    data_version: i64,
    by_collection: Option<std::collections::HashMap<i64, Arc<CollectionIndex>>>,
}

fn register_sqlite_vec() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: sqlite-vec's init function has the signature SQLite expects of an extension
        // entry point; the crate declares it without parameters, hence the transmute.
        #[allow(clippy::missing_transmute_annotations, unsafe_code)]
        unsafe {
            rusqlite::ffi::sqlite3_auto_extension(Some(std::mem::transmute(
                sqlite_vec::sqlite3_vec_init as *const (),
            )));
        }
    });
}

fn db(e: rusqlite::Error) -> RagError {
    RagError::Store(e.to_string())
}

/// How long a write waits for another writer of the same file.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

const SCHEMA: &str = "
PRAGMA journal_mode = WAL;
PRAGMA foreign_keys = ON;
CREATE TABLE IF NOT EXISTS collections (
  id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, embedder TEXT NOT NULL, dims INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
  id INTEGER PRIMARY KEY, collection_id INTEGER NOT NULL REFERENCES collections(id),
  path TEXT NOT NULL, name TEXT NOT NULL, title TEXT NOT NULL, hash TEXT NOT NULL,
  bytes INTEGER NOT NULL, ingested_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ')),
  UNIQUE (collection_id, path));
CREATE TABLE IF NOT EXISTS chunks (
  id INTEGER PRIMARY KEY, document_id INTEGER NOT NULL REFERENCES documents(id),
  ord INTEGER NOT NULL, section TEXT NOT NULL, page INTEGER,
  start INTEGER NOT NULL, end INTEGER NOT NULL, text TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS chunks_by_document ON chunks(document_id);
-- Each document's text as parsed (the offsets citations use), for reading a work whole.
-- Knowledge bases from before it have none: their works are rebuilt from the chunks.
CREATE TABLE IF NOT EXISTS document_texts (
  document_id INTEGER PRIMARY KEY REFERENCES documents(id), text TEXT NOT NULL);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(text, heading, tokenize = 'porter unicode61');
";

/// How files are parsed and chunked, in the hash stored for each: bumped when that changes,
/// so that a file ingested before is read again though its bytes are the same (a scene
/// heading found where none was had its lines cited under the scene before).
const PARSING: u32 = 2;

fn fnv1a(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{h:016x}")
}

fn vec_table(dims: usize) -> String {
    format!("chunk_vectors_{dims}")
}

fn as_blob(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The vector [`as_blob`] stored.
fn floats(blob: &[u8]) -> impl Iterator<Item = f32> + '_ {
    blob.chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Whether the table (a collection's vectors, made at its first insert) exists yet.
fn has_table(conn: &Connection, table: &str) -> Result<bool, RagError> {
    conn.query_row(
        "SELECT count(*) > 0 FROM sqlite_master WHERE name = ?1",
        [table],
        |r| r.get(0),
    )
    .map_err(db)
}

const STOPWORDS: &[&str] = &[
    "a",
    "an",
    "and",
    "are",
    "as",
    "at",
    "be",
    "by",
    "do",
    "does",
    "for",
    "from",
    "how",
    "in",
    "is",
    "it",
    "of",
    "on",
    "or",
    "that",
    "the",
    "this",
    "to",
    "was",
    "what",
    "when",
    "where",
    "which",
    "who",
    "whom",
    "why",
    "with",
    "about",
    "tell",
    "me",
    "our",
    "based",
    "documents",
];

/// The meaningful words of `text` a keyword search looks for (any of them).
pub fn keyword_words(text: &str) -> Vec<String> {
    let mut words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|w| w.chars().count() >= 2 && !STOPWORDS.contains(&w.as_str()))
        .collect();
    words.dedup();
    words
}

/// An FTS5 query matching any of the meaningful words of `text`, each quoted (so user text can
/// never be read as FTS syntax).
pub fn keyword_query(text: &str) -> Option<String> {
    fts_query(&keyword_words(text))
}

fn fts_query(words: &[String]) -> Option<String> {
    (!words.is_empty()).then(|| {
        words
            .iter()
            .map(|w| format!("\"{w}\""))
            .collect::<Vec<_>>()
            .join(" OR ")
    })
}

impl KnowledgeBase {
    /// Opens (or creates) the knowledge base at `path`. `embedder_id` names the embedding model;
    /// a collection stays bound to the model it was built with.
    pub fn open(
        path: &Path,
        embedder: Arc<dyn DynEmbedder>,
        embedder_id: &str,
    ) -> Result<Self, RagError> {
        register_sqlite_vec();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| RagError::Store(format!("cannot create {}: {e}", dir.display())))?;
        }
        let conn = Connection::open(path)
            .map_err(|e| RagError::Store(format!("cannot open {}: {e}", path.display())))?;
        // Another process (`agentry ingest` beside a server) may hold the write lock for one
        // document's transaction: wait for it rather than fail with SQLITE_BUSY.
        conn.busy_timeout(BUSY_TIMEOUT).map_err(db)?;
        conn.execute_batch(SCHEMA).map_err(db)?;
        Ok(KnowledgeBase {
            conn: Arc::new(Mutex::new(conn)),
            embedder,
            embedder_id: embedder_id.to_owned(),
            indexes: Default::default(),
            search_mode: if std::env::var("AGENTRY_RAG_SEARCH").is_ok_and(|v| v == "sqlite") {
                SearchMode::Sqlite
            } else {
                SearchMode::Memory
            },
        })
    }

    /// An in-memory knowledge base (tests, throwaway corpora).
    pub fn in_memory(embedder: Arc<dyn DynEmbedder>, embedder_id: &str) -> Result<Self, RagError> {
        Self::open(Path::new(":memory:"), embedder, embedder_id)
    }

    /// Chooses where search runs (see [`SearchMode`]).
    pub fn set_search_mode(&mut self, mode: SearchMode) {
        self.search_mode = mode;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn index_cache(&self) -> std::sync::MutexGuard<'_, IndexCache> {
        self.indexes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The collection's indexes in memory, loaded in one scan of the vec0 table and one of
    /// the FTS5 table when the cache is empty or stale.
    fn collection_index(
        &self,
        conn: &Connection,
        cid: i64,
    ) -> Result<Arc<CollectionIndex>, RagError> {
        let dv: i64 = conn
            .query_row("PRAGMA data_version", [], |r| r.get(0))
            .map_err(db)?;
        let mut cache = self.index_cache();
        if cache.data_version != dv {
            cache.by_collection = None;
            cache.data_version = dv;
        }
        if cache.by_collection.is_none() {
            let dims = self.embedder.dimensions();
            let mut all: std::collections::HashMap<i64, VectorIndex> = Default::default();
            let table = vec_table(dims);
            if has_table(conn, &table)? {
                let mut st = conn
                    .prepare(&format!(
                        "SELECT rowid, collection_id, embedding FROM {table}"
                    ))
                    .map_err(db)?;
                let mut rows = st.query([]).map_err(db)?;
                let mut v = Vec::with_capacity(dims);
                while let Some(r) = rows.next().map_err(db)? {
                    let (id, c): (i64, i64) = (r.get(0).map_err(db)?, r.get(1).map_err(db)?);
                    let blob = r.get_ref(2).map_err(db)?.as_blob().map_err(|e| {
                        RagError::Store(format!("a stored vector is not a blob: {e}"))
                    })?;
                    v.clear();
                    v.extend(floats(blob));
                    all.entry(c)
                        .or_insert_with(|| VectorIndex::new(dims))
                        .push(id, &v);
                }
            }
            // The keyword index from the text FTS5 indexed, columns weighted as the FTS5
            // query weights them (`bm25(chunks_fts, 1.0, 0.5)`).
            let mut keywords: std::collections::HashMap<i64, KeywordIndexBuilder> =
                Default::default();
            let mut st = conn
                .prepare(
                    "SELECT f.rowid, f.text, f.heading, d.collection_id FROM chunks_fts f \
                     JOIN chunks c ON c.id = f.rowid JOIN documents d ON d.id = c.document_id",
                )
                .map_err(db)?;
            let mut rows = st.query([]).map_err(db)?;
            while let Some(r) = rows.next().map_err(db)? {
                let id: i64 = r.get(0).map_err(db)?;
                let text =
                    r.get_ref(1).map_err(db)?.as_str().map_err(|e| {
                        RagError::Store(format!("an indexed chunk is not text: {e}"))
                    })?;
                let heading =
                    r.get_ref(2).map_err(db)?.as_str().map_err(|e| {
                        RagError::Store(format!("an indexed heading is not text: {e}"))
                    })?;
                let c: i64 = r.get(3).map_err(db)?;
                keywords
                    .entry(c)
                    .or_default()
                    .add(id, &[(text, 1.0), (heading, 0.5)]);
            }
            // Every chunk is in both tables; a collection in one only gets an empty other.
            let mut by_collection: std::collections::HashMap<i64, Arc<CollectionIndex>> =
                Default::default();
            for (c, words) in keywords {
                let vectors = all.remove(&c).unwrap_or_else(|| VectorIndex::new(dims));
                let keywords = words.build();
                by_collection.insert(c, Arc::new(CollectionIndex { vectors, keywords }));
            }
            for (c, vectors) in all {
                let keywords = KeywordIndex::default();
                by_collection.insert(c, Arc::new(CollectionIndex { vectors, keywords }));
            }
            cache.by_collection = Some(by_collection);
        }
        Ok(cache
            .by_collection
            .as_ref()
            .and_then(|m| m.get(&cid).cloned())
            .unwrap_or_else(|| {
                Arc::new(CollectionIndex {
                    vectors: VectorIndex::new(self.embedder.dimensions()),
                    keywords: KeywordIndex::default(),
                })
            }))
    }

    /// The collection's id, created on first use; refuses a collection built with another
    /// embedder, since its vectors would not be comparable.
    fn collection_id(&self, name: &str, create: bool) -> Result<Option<i64>, RagError> {
        let conn = self.lock();
        let dims = self.embedder.dimensions();
        let row: Option<(i64, String, usize)> = conn
            .query_row(
                "SELECT id, embedder, dims FROM collections WHERE name = ?1",
                [name],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()
            .map_err(db)?;
        match row {
            Some((id, model, d)) => {
                if model != self.embedder_id || d != dims {
                    return Err(RagError::Embedder(format!(
                        "collection `{name}` was built with embedder `{model}` ({d} dimensions); \
                         this knowledge base uses `{}` ({dims}): use that embedder or another \
                         collection",
                        self.embedder_id
                    )));
                }
                Ok(Some(id))
            }
            None if create => {
                conn.execute_batch(&format!(
                    "CREATE VIRTUAL TABLE IF NOT EXISTS {} USING vec0(collection_id INTEGER \
                     PARTITION KEY, embedding float[{dims}] distance_metric=cosine)",
                    vec_table(dims)
                ))
                .map_err(db)?;
                conn.execute(
                    "INSERT INTO collections (name, embedder, dims) VALUES (?1, ?2, ?3)",
                    params![name, self.embedder_id, dims],
                )
                .map_err(db)?;
                Ok(Some(conn.last_insert_rowid()))
            }
            None => Ok(None),
        }
    }

    /// Ingests a file or every supported file under a folder into `collection`. Unchanged files
    /// (same content hash) are skipped; a changed file's chunks are replaced in one transaction.
    /// A file that cannot be read or parsed is reported in `skipped` and does not stop the rest.
    pub async fn ingest(
        &self,
        path: &Path,
        collection: &str,
        progress: &(dyn Fn(&Progress) + Sync),
    ) -> Result<IngestReport, RagError> {
        let files = collect_files(path)?;
        let cid = self
            .collection_id(collection, true)?
            .expect("created on demand");
        let mut report = IngestReport {
            collection: collection.to_owned(),
            files_seen: files.len(),
            ..Default::default()
        };
        let total = files.len();
        for (i, file) in files.into_iter().enumerate() {
            let name = file
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let shown = file.display().to_string();
            let Some(format) = Format::of(&file) else {
                report.skipped.push((shown, "unsupported file type".into()));
                continue;
            };
            // Reading, hashing and parsing block (a PDF parses for seconds).
            let read = {
                let (file, name) = (file.clone(), name.clone());
                self.blocking(move |kb| kb.read_document(&file, cid, format, &name))
                    .await?
            };
            let (key, hash, len, doc) = match read {
                Read::Skipped(why) => {
                    report.skipped.push((shown, why));
                    continue;
                }
                Read::Unchanged => {
                    report.unchanged.push(shown);
                    continue;
                }
                Read::Changed {
                    key,
                    hash,
                    bytes,
                    doc,
                } => (key, hash, bytes, doc),
            };
            let chunks = chunk(&doc, CHUNK_BYTES);
            let texts: Vec<String> = chunks
                .iter()
                .map(|c| embed_text(&doc.title, &c.section, &c.text))
                .collect();
            // The vectors of the same texts as stored for this file before, kept.
            let kept = {
                let key = key.clone();
                self.blocking(move |kb| kb.stored_vectors(cid, &key))
                    .await?
            };
            let mut vectors: Vec<Option<Vec<f32>>> =
                texts.iter().map(|t| kept.get(t).cloned()).collect();
            let missing: Vec<usize> = (0..texts.len()).filter(|&j| vectors[j].is_none()).collect();
            for (b, batch) in missing.chunks(EMBED_BATCH).enumerate() {
                progress(&Progress {
                    file: shown.clone(),
                    file_index: i,
                    files: total,
                    chunks_done: chunks.len() - missing.len() + b * EMBED_BATCH,
                    chunks_total: chunks.len(),
                });
                let v = self
                    .embedder
                    .embed_dyn(batch.iter().map(|&j| texts[j].clone()).collect())
                    .await
                    .map_err(|e| RagError::Embedder(e.to_string()))?;
                if v.len() != batch.len() {
                    return Err(RagError::Embedder(format!(
                        "{} vectors for {} texts",
                        v.len(),
                        batch.len()
                    )));
                }
                for (&j, v) in batch.iter().zip(v) {
                    vectors[j] = Some(v);
                }
            }
            let vectors: Vec<Vec<f32>> = vectors.into_iter().flatten().collect();
            let embedded = missing.len();
            progress(&Progress {
                file: shown.clone(),
                file_index: i,
                files: total,
                chunks_done: chunks.len(),
                chunks_total: chunks.len(),
            });
            let written = self
                .blocking(move |kb| {
                    kb.replace_document(
                        cid,
                        &key,
                        &name,
                        &doc.title,
                        &hash,
                        len,
                        &chunks,
                        &vectors,
                        Some(&doc.text),
                    )
                    .map(|replaced| replaced.then_some(chunks.len()))
                })
                .await?;
            match written {
                Some(n) => {
                    report.chunks += n;
                    report.embedded += embedded;
                    report.ingested.push(shown);
                }
                // Another ingest stored the same content meanwhile.
                None => report.unchanged.push(shown),
            }
        }
        Ok(report)
    }

    /// The vectors stored for the file `key` of collection `cid`, by the text embedded for
    /// each chunk ([`embed_text`]): what a re-ingest of the same chunks need not embed again.
    fn stored_vectors(
        &self,
        cid: i64,
        key: &str,
    ) -> Result<std::collections::HashMap<String, Vec<f32>>, RagError> {
        let conn = self.lock();
        let table = vec_table(self.embedder.dimensions());
        if !has_table(&conn, &table)? {
            return Ok(std::collections::HashMap::new());
        }
        let mut st = conn
            .prepare(&format!(
                "SELECT d.title, c.section, c.text, v.embedding FROM chunks c \
                 JOIN documents d ON d.id = c.document_id JOIN {table} v ON v.rowid = c.id \
                 WHERE d.collection_id = ?1 AND d.path = ?2"
            ))
            .map_err(db)?;
        let rows = st
            .query_map(params![cid, key], |r| {
                let (title, section, text): (String, String, String) =
                    (r.get(0)?, r.get(1)?, r.get(2)?);
                let blob: Vec<u8> = r.get(3)?;
                Ok((embed_text(&title, &section, &text), blob))
            })
            .map_err(db)?;
        let dims = self.embedder.dimensions();
        let mut out = std::collections::HashMap::new();
        for row in rows {
            let (text, blob) = row.map_err(db)?;
            // A vector of another size is not this embedder's: embedded again.
            if blob.len() == dims * 4 {
                out.insert(text, floats(&blob).collect());
            }
        }
        Ok(out)
    }

    /// Reads, hashes and parses one file for [`KnowledgeBase::ingest`] (blocking).
    fn read_document(
        &self,
        file: &Path,
        cid: i64,
        format: Format,
        name: &str,
    ) -> Result<Read, RagError> {
        match std::fs::metadata(file) {
            Ok(m) if m.len() > MAX_FILE_BYTES => {
                return Ok(Read::Skipped(format!(
                    "larger than {} MiB",
                    MAX_FILE_BYTES >> 20
                )));
            }
            Err(e) => return Ok(Read::Skipped(e.to_string())),
            _ => {}
        }
        let bytes = match std::fs::read(file) {
            Ok(b) => b,
            Err(e) => return Ok(Read::Skipped(e.to_string())),
        };
        let hash = format!("{}-{PARSING}", fnv1a(&bytes));
        let key = std::fs::canonicalize(file)
            .unwrap_or(file.to_owned())
            .display()
            .to_string();
        if self.stored_hash(cid, &key)?.as_deref() == Some(hash.as_str()) {
            return Ok(Read::Unchanged);
        }
        match parse(&bytes, format, name) {
            Ok(doc) => Ok(Read::Changed {
                key,
                hash,
                bytes: bytes.len(),
                doc,
            }),
            Err(e) => Ok(Read::Skipped(e.to_string())),
        }
    }

    fn stored_hash(&self, cid: i64, key: &str) -> Result<Option<String>, RagError> {
        self.lock()
            .query_row(
                "SELECT hash FROM documents WHERE collection_id = ?1 AND path = ?2",
                params![cid, key],
                |r| r.get(0),
            )
            .optional()
            .map_err(db)
    }

    /// Adds (or replaces) a document whose chunks are already embedded: for vectors computed
    /// elsewhere, and for benchmarks at scale. `key` identifies the document in the collection.
    pub fn add_embedded(
        &self,
        collection: &str,
        key: &str,
        title: &str,
        chunks: &[super::chunk::Chunk],
        vectors: &[Vec<f32>],
    ) -> Result<(), RagError> {
        if chunks.len() != vectors.len()
            || vectors
                .iter()
                .any(|v| v.len() != self.embedder.dimensions())
        {
            return Err(RagError::Input(format!(
                "{} chunks need {} vectors of {} dimensions",
                chunks.len(),
                chunks.len(),
                self.embedder.dimensions()
            )));
        }
        let cid = self
            .collection_id(collection, true)?
            .expect("created on demand");
        let name = Path::new(key)
            .file_name()
            .map_or(key.to_owned(), |n| n.to_string_lossy().into_owned());
        let bytes = chunks.iter().map(|c| c.end).max().unwrap_or(0);
        self.replace_document(cid, key, &name, title, "", bytes, chunks, vectors, None)
            .map(drop)
    }

    /// Every chunk of a collection with its vector, in id order (export, re-indexing).
    pub fn export(&self, collection: &str) -> Result<Vec<(Hit, Vec<f32>)>, RagError> {
        let Some(cid) = self.collection_id(collection, false)? else {
            return Ok(Vec::new());
        };
        let conn = self.lock();
        let mut st = conn
            .prepare(&format!(
                "SELECT c.id, c.section, c.page, c.start, c.end, c.text, d.name, d.title, d.path, \
                 v.embedding FROM chunks c JOIN documents d ON d.id = c.document_id \
                 JOIN {} v ON v.rowid = c.id WHERE d.collection_id = ?1 ORDER BY c.id",
                vec_table(self.embedder.dimensions())
            ))
            .map_err(db)?;
        st.query_map([cid], |r| {
            let blob: Vec<u8> = r.get(9)?;
            let v = floats(&blob).collect();
            Ok((
                Hit {
                    chunk_id: r.get(0)?,
                    section: r.get(1)?,
                    page: r.get(2)?,
                    start: r.get(3)?,
                    end: r.get(4)?,
                    text: r.get(5)?,
                    document: r.get(6)?,
                    title: r.get(7)?,
                    path: r.get(8)?,
                    score: 0.0,
                    vector_rank: None,
                    keyword_rank: None,
                },
                v,
            ))
        })
        .map_err(db)?
        .collect::<Result<_, _>>()
        .map_err(db)
    }

    /// The documents of a collection: (path, file name, title), in the order they were
    /// ingested.
    pub fn documents(&self, collection: &str) -> Result<Vec<(String, String, String)>, RagError> {
        let Some(cid) = self.collection_id(collection, false)? else {
            return Ok(Vec::new());
        };
        let conn = self.lock();
        let mut st = conn
            .prepare("SELECT path, name, title FROM documents WHERE collection_id = ?1 ORDER BY id")
            .map_err(db)?;
        st.query_map([cid], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .map_err(db)?
            .collect::<Result<_, _>>()
            .map_err(db)
    }

    /// One document whole, for reading it as a work (a brief): its text as parsed (the offsets
    /// citations use), its sections and its chunks. A document ingested before the knowledge
    /// base kept texts is rebuilt from its chunks, which are stored trimmed: the whitespace
    /// between two comes back as a line end (one byte) or a blank line (more).
    pub fn work(
        &self,
        collection: &str,
        path: &str,
    ) -> Result<Option<super::brief::Work>, RagError> {
        let Some(cid) = self.collection_id(collection, false)? else {
            return Ok(None);
        };
        let conn = self.lock();
        let doc: Option<(i64, String, String, usize)> = conn
            .query_row(
                "SELECT id, name, title, bytes FROM documents WHERE collection_id = ?1 AND path = ?2",
                params![cid, path],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .optional()
            .map_err(db)?;
        let Some((id, name, title, bytes)) = doc else {
            return Ok(None);
        };
        let stored: Option<String> = conn
            .query_row(
                "SELECT text FROM document_texts WHERE document_id = ?1",
                [id],
                |r| r.get(0),
            )
            .optional()
            .map_err(db)?;
        let mut st = conn
            .prepare(
                "SELECT id, section, start, end, text FROM chunks WHERE document_id = ?1 \
                 ORDER BY start",
            )
            .map_err(db)?;
        let rows: Vec<(i64, String, usize, usize, String)> = st
            .query_map([id], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })
            .map_err(db)?
            .collect::<Result<_, _>>()
            .map_err(db)?;
        let mut w = super::brief::Work {
            document: name,
            title,
            ..Default::default()
        };
        // The stored text is used when every chunk is where it says it is in it.
        let fits = stored.as_deref().is_some_and(|t| {
            rows.iter()
                .all(|(_, _, start, end, text)| t.get(*start..*end) == Some(text.as_str()))
        });
        let mut rebuilt = String::new();
        for (cid, section, start, end, text) in rows {
            // Overlapping or inconsistent rows (a damaged file) are skipped, not trusted.
            if start < rebuilt.len() || end != start + text.len() {
                continue;
            }
            match start - rebuilt.len() {
                0 => {}
                1 => rebuilt.push('\n'),
                n => {
                    rebuilt.push_str("\n\n");
                    rebuilt.extend(std::iter::repeat_n(' ', n - 2));
                }
            }
            rebuilt.push_str(&text);
            w.chunks.push((cid, start, end));
            match w.sections.last_mut() {
                Some(last) if last.0 == section => last.2 = end,
                _ => w.sections.push((section, start, end)),
            }
        }
        w.text = match stored {
            Some(t) if fits => t,
            _ => {
                // Whatever followed the last chunk was whitespace.
                let tail = bytes.saturating_sub(rebuilt.len()).min(1 << 20);
                rebuilt.extend(std::iter::repeat_n('\n', tail));
                rebuilt
            }
        };
        Ok(Some(w))
    }

    #[allow(clippy::too_many_arguments)]
    fn replace_document(
        &self,
        cid: i64,
        key: &str,
        name: &str,
        title: &str,
        hash: &str,
        bytes: usize,
        chunks: &[super::chunk::Chunk],
        vectors: &[Vec<f32>],
        text: Option<&str>,
    ) -> Result<bool, RagError> {
        let dims = self.embedder.dimensions();
        let table = vec_table(dims);
        let mut conn = self.lock();
        // The write lock from the start, so the hash checked is the hash replaced: an ingest
        // that embedded the same content as another one finishing first writes nothing.
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(db)?;
        let old: Option<(i64, String)> = tx
            .query_row(
                "SELECT id, hash FROM documents WHERE collection_id = ?1 AND path = ?2",
                params![cid, key],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(db)?;
        let doc_id = match old {
            // (`add_embedded` passes no hash: it always replaces.)
            Some((_, stored)) if !hash.is_empty() && stored == hash => return Ok(false),
            Some((id, _)) => {
                for sql in [
                    format!(
                        "DELETE FROM {table} WHERE rowid IN (SELECT id FROM chunks WHERE document_id = ?1)"
                    ),
                    "DELETE FROM chunks_fts WHERE rowid IN (SELECT id FROM chunks WHERE document_id = ?1)".into(),
                    "DELETE FROM chunks WHERE document_id = ?1".into(),
                    "DELETE FROM document_texts WHERE document_id = ?1".into(),
                ] {
                    tx.execute(&sql, [id]).map_err(db)?;
                }
                tx.execute(
                    "UPDATE documents SET name = ?2, title = ?3, hash = ?4, bytes = ?5, \
                     ingested_at = strftime('%Y-%m-%dT%H:%M:%fZ') WHERE id = ?1",
                    params![id, name, title, hash, bytes],
                )
                .map_err(db)?;
                id
            }
            None => {
                tx.execute(
                    "INSERT INTO documents (collection_id, path, name, title, hash, bytes) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![cid, key, name, title, hash, bytes],
                )
                .map_err(db)?;
                tx.last_insert_rowid()
            }
        };
        if let Some(text) = text {
            tx.execute(
                "INSERT INTO document_texts (document_id, text) VALUES (?1, ?2)",
                params![doc_id, text],
            )
            .map_err(db)?;
        }
        {
            let mut ins = tx
                .prepare(
                    "INSERT INTO chunks (document_id, ord, section, page, start, end, text) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )
                .map_err(db)?;
            let mut fts = tx
                .prepare("INSERT INTO chunks_fts (rowid, text, heading) VALUES (?1, ?2, ?3)")
                .map_err(db)?;
            let mut vec = tx
                .prepare(&format!(
                    "INSERT INTO {table} (rowid, collection_id, embedding) VALUES (?1, ?2, ?3)"
                ))
                .map_err(db)?;
            for (i, (c, v)) in chunks.iter().zip(vectors).enumerate() {
                ins.execute(params![
                    doc_id, i, c.section, c.page, c.start, c.end, c.text
                ])
                .map_err(db)?;
                let id = tx.last_insert_rowid();
                fts.execute(params![id, c.text, format!("{title} {}", c.section)])
                    .map_err(db)?;
                vec.execute(params![id, cid, as_blob(v)]).map_err(db)?;
            }
        }
        tx.commit().map_err(db)?;
        // Our own commits do not move `data_version`: drop the copies here.
        self.index_cache().by_collection = None;
        Ok(true)
    }

    /// The `k` best chunks for `query` in `collection`, by hybrid search.
    pub async fn search(
        &self,
        collection: &str,
        query: &str,
        k: usize,
    ) -> Result<Vec<Hit>, RagError> {
        let qv = self
            .embedder
            .embed_dyn(vec![query.to_owned()])
            .await
            .map_err(|e| RagError::Embedder(e.to_string()))?
            .pop()
            .ok_or_else(|| RagError::Embedder("no vector for the query".into()))?;
        // SQLite queries and the vector scan block.
        let (collection, query) = (collection.to_owned(), query.to_owned());
        self.blocking(move |kb| kb.search_embedded(&collection, &query, &qv, k))
            .await
    }

    /// Runs `f` on the blocking pool (SQLite calls and scans must not hold an async worker).
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&KnowledgeBase) -> Result<T, RagError> + Send + 'static,
    ) -> Result<T, RagError> {
        let kb = self.clone();
        tokio::task::spawn_blocking(move || f(&kb))
            .await
            .map_err(|e| RagError::Store(format!("knowledge base worker failed: {e}")))?
    }

    /// Hybrid search with the query's vector already computed (`qv`, from this knowledge
    /// base's embedder).
    pub fn search_embedded(
        &self,
        collection: &str,
        query: &str,
        qv: &[f32],
        k: usize,
    ) -> Result<Vec<Hit>, RagError> {
        let Some(cid) = self.collection_id(collection, false)? else {
            return Err(RagError::UnknownCollection {
                name: collection.to_owned(),
                known: self
                    .collections()?
                    .into_iter()
                    .map(|c| c.name)
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        };
        if qv.len() != self.embedder.dimensions() {
            return Err(RagError::Input(format!(
                "query vector has {} dimensions, the collection {}",
                qv.len(),
                self.embedder.dimensions()
            )));
        }
        let k = k.clamp(1, 200);
        let depth = (k * 4).max(20);
        let conn = self.lock();
        let words = keyword_words(query);
        // Exact nearest neighbours by cosine distance and the best BM25 matches: from the
        // in-memory indexes, or from sqlite-vec's scan and FTS5 (see `SearchMode`; the
        // benchmark compares the two).
        let (vector, keyword): (Vec<i64>, Vec<i64>) = if self.search_mode == SearchMode::Memory {
            let ix = self.collection_index(&conn, cid)?;
            let keyword = ix.keywords.search(&words, depth);
            (
                ix.vectors.nearest(qv, depth),
                keyword.into_iter().map(|(id, _)| id).collect(),
            )
        } else {
            let mut st = conn
                .prepare_cached(&format!(
                    "SELECT rowid FROM {} WHERE embedding MATCH ?1 AND k = ?2 AND collection_id = ?3 \
                     ORDER BY distance",
                    vec_table(qv.len())
                ))
                .map_err(db)?;
            let vector = st
                .query_map(params![as_blob(qv), depth, cid], |r| r.get(0))
                .map_err(db)?
                .collect::<Result<_, _>>()
                .map_err(db)?;
            (vector, self.fts_search(&conn, cid, &words, depth)?)
        };
        let mut fused: std::collections::HashMap<i64, (f64, Option<usize>, Option<usize>)> =
            Default::default();
        for (rank, id) in vector.iter().enumerate() {
            let e = fused.entry(*id).or_default();
            e.0 += 1.0 / (RRF_K + rank as f64 + 1.0);
            e.1 = Some(rank + 1);
        }
        for (rank, id) in keyword.iter().enumerate() {
            let e = fused.entry(*id).or_default();
            e.0 += 1.0 / (RRF_K + rank as f64 + 1.0);
            e.2 = Some(rank + 1);
        }
        let mut ranked: Vec<_> = fused.into_iter().collect();
        ranked.sort_by(|a, b| b.1.0.total_cmp(&a.1.0).then(a.0.cmp(&b.0)));
        ranked.truncate(k);
        let mut st = conn
            .prepare_cached(
                "SELECT c.section, c.page, c.start, c.end, c.text, d.name, d.title, d.path \
                 FROM chunks c JOIN documents d ON d.id = c.document_id WHERE c.id = ?1",
            )
            .map_err(db)?;
        ranked
            .into_iter()
            .map(|(id, (score, vr, kr))| {
                st.query_row([id], |r| hit_row(id, r))
                    .map(|h| Hit {
                        score,
                        vector_rank: vr,
                        keyword_rank: kr,
                        ..h
                    })
                    .map_err(db)
            })
            .collect()
    }

    /// The best `depth` BM25 matches of any of `words` by FTS5.
    fn fts_search(
        &self,
        conn: &Connection,
        cid: i64,
        words: &[String],
        depth: usize,
    ) -> Result<Vec<i64>, RagError> {
        let Some(q) = fts_query(words) else {
            return Ok(Vec::new());
        };
        // With one collection in the knowledge base every FTS row is in it, so the join that
        // filters by collection (half the keyword time at 100k chunks, where an OR of common
        // words matches most rows) is left out; same results.
        let collections: i64 = conn
            .prepare_cached("SELECT count(*) FROM collections")
            .and_then(|mut st| st.query_row([], |r| r.get(0)))
            .map_err(db)?;
        let (sql, collection) = if collections == 1 {
            (
                "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?1 \
                 ORDER BY bm25(chunks_fts, 1.0, 0.5) LIMIT ?2",
                None,
            )
        } else {
            (
                "SELECT f.rowid FROM chunks_fts f JOIN chunks c ON c.id = f.rowid \
                 JOIN documents d ON d.id = c.document_id \
                 WHERE chunks_fts MATCH ?1 AND d.collection_id = ?3 \
                 ORDER BY bm25(chunks_fts, 1.0, 0.5) LIMIT ?2",
                Some(cid),
            )
        };
        let mut st = conn.prepare_cached(sql).map_err(db)?;
        fn first(r: &rusqlite::Row<'_>) -> rusqlite::Result<i64> {
            r.get(0)
        }
        let rows = match collection {
            None => st.query_map(params![q, depth], first),
            Some(c) => st.query_map(params![q, depth, c], first),
        };
        rows.map_err(db)?.collect::<Result<_, _>>().map_err(db)
    }

    /// Chunks by id (unknown ids are an error naming them).
    pub fn chunks_by_id(&self, ids: &[i64]) -> Result<Vec<Hit>, RagError> {
        let conn = self.lock();
        let mut st = conn
            .prepare(
                "SELECT c.section, c.page, c.start, c.end, c.text, d.name, d.title, d.path \
                 FROM chunks c JOIN documents d ON d.id = c.document_id WHERE c.id = ?1",
            )
            .map_err(db)?;
        ids.iter()
            .map(|&id| {
                st.query_row([id], |r| hit_row(id, r))
                    .optional()
                    .map_err(db)?
                    .ok_or_else(|| RagError::Input(format!("no chunk with id {id}")))
            })
            .collect()
    }

    /// The collections and their sizes.
    pub fn collections(&self) -> Result<Vec<CollectionInfo>, RagError> {
        let conn = self.lock();
        let mut st = conn
            .prepare(
                "SELECT c.name, c.embedder, c.dims, \
                 (SELECT count(*) FROM documents d WHERE d.collection_id = c.id), \
                 (SELECT count(*) FROM chunks k JOIN documents d ON d.id = k.document_id \
                  WHERE d.collection_id = c.id) FROM collections c ORDER BY c.name",
            )
            .map_err(db)?;
        st.query_map([], |r| {
            Ok(CollectionInfo {
                name: r.get(0)?,
                embedder: r.get(1)?,
                dimensions: r.get(2)?,
                documents: r.get(3)?,
                chunks: r.get(4)?,
            })
        })
        .map_err(db)?
        .collect::<Result<_, _>>()
        .map_err(db)
    }

    /// The embedder this knowledge base embeds with.
    pub fn embedder(&self) -> &Arc<dyn DynEmbedder> {
        &self.embedder
    }
}

fn hit_row(id: i64, r: &rusqlite::Row<'_>) -> rusqlite::Result<Hit> {
    Ok(Hit {
        chunk_id: id,
        section: r.get(0)?,
        page: r.get(1)?,
        start: r.get(2)?,
        end: r.get(3)?,
        text: r.get(4)?,
        document: r.get(5)?,
        title: r.get(6)?,
        path: r.get(7)?,
        score: 0.0,
        vector_rank: None,
        keyword_rank: None,
    })
}

/// The text embedded for a chunk: where it is, then what it says (the heading path carries
/// meaning the chunk's own words may not, e.g. the play a scene belongs to).
pub fn embed_text(title: &str, section: &str, text: &str) -> String {
    format!("{title} — {section}\n{text}")
}

/// Supported and unsupported files under `path` (a file, or a folder walked recursively,
/// hidden entries skipped), sorted.
fn collect_files(path: &Path) -> Result<Vec<PathBuf>, RagError> {
    let meta = std::fs::metadata(path)
        .map_err(|e| RagError::Input(format!("cannot read {}: {e}", path.display())))?;
    if meta.is_file() {
        return Ok(vec![path.to_owned()]);
    }
    let mut out = Vec::new();
    let mut stack = vec![path.to_owned()];
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir)
            .map_err(|e| RagError::Input(format!("cannot list {}: {e}", dir.display())))?;
        for e in entries.flatten() {
            let p = e.path();
            if e.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(p),
                Ok(t) if t.is_file() => out.push(p),
                _ => {}
            }
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyword_queries_quote_words_and_drop_syntax() {
        assert_eq!(
            keyword_query("Who is Hamlet?").as_deref(),
            Some("\"hamlet\"")
        );
        assert_eq!(
            keyword_query("NEAR(\"x\" OR y*) -- drop").as_deref(),
            Some("\"near\" OR \"drop\"")
        );
        assert_eq!(keyword_query("who is it?"), None);
    }
}

#[cfg(test)]
mod vector_tests {
    use super::*;
    use crate::rag::chunk::Chunk;
    use agentry_core::embed::{EmbedError, Embedder};

    /// Unit vectors along axis `i` for texts `"axis i"`: the nearest neighbour is known exactly.
    struct Axes;
    impl Embedder for Axes {
        fn dimensions(&self) -> usize {
            8
        }
        async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, EmbedError> {
            Ok(texts
                .iter()
                .map(|t| {
                    let i: usize = t
                        .rsplit(' ')
                        .next()
                        .and_then(|n| n.parse().ok())
                        .unwrap_or(0);
                    (0..8).map(|d| if d == i % 8 { 1.0 } else { 0.0 }).collect()
                })
                .collect())
        }
    }

    /// A vector of each text's own (its hash's bytes), counting the texts it embeds.
    #[derive(Default)]
    struct Counting(std::sync::atomic::AtomicUsize);
    fn hashed(text: &str) -> Vec<f32> {
        let h = fnv1a(text.as_bytes());
        h.bytes().take(8).map(f32::from).collect()
    }
    impl Embedder for Counting {
        fn dimensions(&self) -> usize {
            8
        }
        async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, EmbedError> {
            self.0
                .fetch_add(texts.len(), std::sync::atomic::Ordering::SeqCst);
            Ok(texts.iter().map(|t| hashed(t)).collect())
        }
    }

    /// A changed file's chunks whose section and text are as stored keep their vectors: only
    /// the edited part is embedded again.
    #[tokio::test]
    async fn a_changed_file_embeds_only_its_changed_chunks() {
        let dir = std::env::temp_dir().join(format!("agentry-kb-reuse-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let doc = |edited: &str| {
            (0..6)
                .map(|i| {
                    let body = if i == 3 {
                        edited
                    } else {
                        "The same words as before"
                    };
                    format!("## Part {i}\n\n{body}, part {i}.\n\n")
                })
                .collect::<String>()
        };
        let file = dir.join("notes.md");
        std::fs::write(&file, doc("Words as first written")).unwrap();
        let counting = Arc::new(Counting::default());
        let kb = KnowledgeBase::open(&dir.join("kb.db"), counting.clone(), "axes").unwrap();
        let first = kb.ingest(&file, "c", &|_| {}).await.unwrap();
        assert!(first.chunks >= 6, "{first:?}");
        assert_eq!(first.embedded, first.chunks);
        let before = kb.export("c").unwrap();
        std::fs::write(&file, doc("Words written again")).unwrap();
        let n = counting.0.load(std::sync::atomic::Ordering::SeqCst);
        let second = kb.ingest(&file, "c", &|_| {}).await.unwrap();
        assert_eq!(second.ingested.len(), 1, "{second:?}");
        assert_eq!(second.chunks, first.chunks);
        assert_eq!(second.embedded, 1, "{second:?}");
        assert_eq!(counting.0.load(std::sync::atomic::Ordering::SeqCst), n + 1);
        // Every chunk has the vector its text has, kept or new.
        let after = kb.export("c").unwrap();
        assert_eq!(after.len(), before.len());
        for (hit, v) in &after {
            let text = embed_text(&hit.title, &hit.section, &hit.text);
            assert_eq!(*v, hashed(&text));
        }
        assert!(after.iter().any(|(h, _)| h.text.contains("written again")));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn vector_search_ranks_the_nearest_chunk_first() {
        let kb = KnowledgeBase::in_memory(Arc::new(Axes), "axes").unwrap();
        let chunks: Vec<Chunk> = (0..8)
            .map(|i| Chunk {
                section: String::new(),
                page: None,
                start: i * 10,
                end: i * 10 + 5,
                text: format!("words{i}"),
            })
            .collect();
        let vectors: Vec<Vec<f32>> = (0..8)
            .map(|i| (0..8).map(|d| if d == i { 1.0 } else { 0.0 }).collect())
            .collect();
        kb.add_embedded("c", "doc", "Doc", &chunks, &vectors)
            .unwrap();
        for mode in [SearchMode::Memory, SearchMode::Sqlite] {
            let mut kb = same_kb(&kb);
            kb.set_search_mode(mode);
            for i in 0..8 {
                let hits = kb.search("c", &format!("axis {i}"), 3).await.unwrap();
                assert_eq!(hits[0].text, format!("words{i}"), "{mode:?}: {hits:?}");
                assert_eq!(hits[0].vector_rank, Some(1));
            }
        }
    }

    /// A work is read back whole: the stored text as ingested, or, for a knowledge base from
    /// before texts were kept, rebuilt from the chunks with each chunk at its offsets.
    #[tokio::test]
    async fn a_work_reads_back_as_ingested_or_rebuilt_from_chunks() {
        let dir = std::env::temp_dir().join(format!("agentry-kb-work-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let text =
            "# Notes\n\nFirst paragraph, with a line\n  indented after it.\n\n## Part\n\nSecond.\n";
        std::fs::write(dir.join("notes.md"), text).unwrap();
        let kb = KnowledgeBase::open(&dir.join("kb.db"), Arc::new(Axes), "axes").unwrap();
        kb.ingest(&dir.join("notes.md"), "c", &|_| {})
            .await
            .unwrap();
        let docs = kb.documents("c").unwrap();
        assert_eq!(docs.len(), 1);
        let w = kb.work("c", &docs[0].0).unwrap().unwrap();
        assert_eq!(w.text, text);
        assert_eq!(w.document, "notes.md");
        assert!(
            w.sections.iter().any(|s| s.0 == "Notes > Part"),
            "{:?}",
            w.sections
        );
        kb.lock().execute("DELETE FROM document_texts", []).unwrap();
        let w = kb.work("c", &docs[0].0).unwrap().unwrap();
        assert_eq!(w.text.len(), text.len());
        for &(id, a, b) in &w.chunks {
            let chunk = &kb.chunks_by_id(&[id]).unwrap()[0];
            assert_eq!(&w.text[a..b], chunk.text);
        }
        assert!(kb.work("c", "no/such/path").unwrap().is_none());
        // The same bytes are read again when they were parsed by an older version.
        let again = kb
            .ingest(&dir.join("notes.md"), "c", &|_| {})
            .await
            .unwrap();
        assert_eq!(again.unchanged.len(), 1, "{again:?}");
        kb.lock()
            .execute("UPDATE documents SET hash = ?1", [fnv1a(text.as_bytes())])
            .unwrap();
        let again = kb
            .ingest(&dir.join("notes.md"), "c", &|_| {})
            .await
            .unwrap();
        assert_eq!(again.ingested.len(), 1, "{again:?}");
        assert!(kb.work("nope", &docs[0].0).unwrap().is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Keyword and vector candidates stay inside the searched collection, with one collection
    /// in the knowledge base (no join) and with several (joined).
    #[tokio::test]
    async fn search_stays_in_its_collection() {
        let kb = KnowledgeBase::in_memory(Arc::new(Axes), "axes").unwrap();
        let chunk = |text: &str| Chunk {
            section: String::new(),
            page: None,
            start: 0,
            end: 5,
            text: text.into(),
        };
        let v = |i: usize| -> Vec<f32> { (0..8).map(|d| if d == i { 1.0 } else { 0.0 }).collect() };
        kb.add_embedded("a", "a1", "A", &[chunk("shared words alpha")], &[v(1)])
            .unwrap();
        let only = kb.search("a", "shared words axis 1", 5).await.unwrap();
        assert_eq!(only.len(), 1);
        assert_eq!(
            (only[0].keyword_rank, only[0].vector_rank),
            (Some(1), Some(1))
        );
        kb.add_embedded("b", "b1", "B", &[chunk("shared words beta")], &[v(1)])
            .unwrap();
        for (c, want) in [("a", "shared words alpha"), ("b", "shared words beta")] {
            let hits = kb.search(c, "shared words axis 1", 5).await.unwrap();
            assert_eq!(hits.len(), 1, "{c}: {hits:?}");
            assert_eq!(hits[0].text, want);
            assert_eq!(hits[0].keyword_rank, Some(1), "{c}: {hits:?}");
        }
    }

    /// A second handle on the same database (its own vector cache).
    fn same_kb(kb: &KnowledgeBase) -> KnowledgeBase {
        KnowledgeBase {
            conn: kb.conn.clone(),
            embedder: kb.embedder.clone(),
            embedder_id: kb.embedder_id.clone(),
            indexes: Default::default(),
            search_mode: kb.search_mode,
        }
    }

    fn doc(i: usize) -> (Vec<Chunk>, Vec<Vec<f32>>) {
        let chunk = Chunk {
            section: String::new(),
            page: None,
            start: 0,
            end: 5,
            text: format!("words{i}"),
        };
        let v = (0..8).map(|d| if d == i { 1.0 } else { 0.0 }).collect();
        (vec![chunk], vec![v])
    }

    /// The in-memory copy follows writes: this knowledge base's own, and another process's
    /// (seen through SQLite's `data_version`).
    #[tokio::test]
    async fn the_in_memory_vectors_follow_writes_from_any_connection() {
        let path = std::env::temp_dir().join(format!("agentry-kb-{}.db", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let a = KnowledgeBase::open(&path, Arc::new(Axes), "axes").unwrap();
        let b = KnowledgeBase::open(&path, Arc::new(Axes), "axes").unwrap();
        let (c, v) = doc(1);
        a.add_embedded("c", "one", "One", &c, &v).unwrap();
        assert_eq!(a.search("c", "axis 2", 1).await.unwrap()[0].text, "words1");
        // Our own write.
        let (c, v) = doc(2);
        a.add_embedded("c", "two", "Two", &c, &v).unwrap();
        assert_eq!(a.search("c", "axis 2", 1).await.unwrap()[0].text, "words2");
        // Another connection's write (a concurrent `agentry ingest`).
        let (c, v) = doc(3);
        b.add_embedded("c", "three", "Three", &c, &v).unwrap();
        assert_eq!(a.search("c", "axis 3", 1).await.unwrap()[0].text, "words3");
        // A replaced document's old vector is gone.
        let (c, v) = doc(5);
        b.add_embedded("c", "three", "Three", &c, &v).unwrap();
        let hits = a.search("c", "axis 3", 3).await.unwrap();
        assert!(hits.iter().all(|h| h.text != "words3"), "{hits:?}");
        let _ = std::fs::remove_file(&path);
    }

    /// Embeds like [`Axes`], slowly, so two ingests of one folder overlap.
    struct SlowAxes;
    impl Embedder for SlowAxes {
        fn dimensions(&self) -> usize {
            8
        }
        async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, EmbedError> {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            Axes.embed(texts).await
        }
    }

    /// Two writers on one file (`agentry ingest` beside a server, or two ingests): neither
    /// fails with SQLITE_BUSY, and a file both read is stored once (the second writer finds
    /// the same content already there and writes nothing).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_writers_ingest_one_folder_side_by_side() {
        let dir = std::env::temp_dir().join(format!("agentry-kb-two-{}", std::process::id()));
        let docs = dir.join("docs");
        std::fs::create_dir_all(&docs).unwrap();
        for i in 0..6 {
            let text = format!(
                "# Part {i}\n\n{}",
                format!("line {i} of the text. ").repeat(200)
            );
            std::fs::write(docs.join(format!("part{i}.md")), text).unwrap();
        }
        let path = dir.join("kb.db");
        let _ = std::fs::remove_file(&path);
        let a = KnowledgeBase::open(&path, Arc::new(SlowAxes), "axes").unwrap();
        let b = KnowledgeBase::open(&path, Arc::new(SlowAxes), "axes").unwrap();
        let quiet = |_: &Progress| {};
        let (ra, rb) = tokio::join!(a.ingest(&docs, "c", &quiet), b.ingest(&docs, "c", &quiet));
        let (ra, rb) = (ra.unwrap(), rb.unwrap());
        assert_eq!(ra.ingested.len() + rb.ingested.len(), 6, "{ra:?} {rb:?}");
        assert_eq!(ra.unchanged.len() + rb.unchanged.len(), 6, "{ra:?} {rb:?}");
        let stored = &a.collections().unwrap()[0];
        assert_eq!(stored.documents, 6);
        assert_eq!(
            stored.chunks,
            ra.chunks + rb.chunks,
            "a chunk was stored twice"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
