//! A directory's small blobs as records appended to one file, found through an index in
//! memory that is rebuilt from the records' headers when the directory is first used.
//!
//! A record is `magic, crc32, name length (u16), body length (u32), kind (u8), name, body`,
//! little-endian; the checksum covers everything after it. A later record of a name replaces
//! an earlier one, and a record of kind `DELETED` removes it. A record a crash left torn at the
//! end is ignored, and cut off before the next record is appended. Records that follow a
//! damaged one cannot be found either; the bytes from the damage on are then moved to a file
//! of their own (`@segment.damaged-<offset>`) before the cut, not thrown away.

use bytes::Bytes;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A directory's segment file. Keys are made of letters, digits and `/_-.`, so no blob is
/// named like it.
const FILE_NAME: &str = "@segment";

/// The largest body kept in a segment: a larger one is a file of its own, so that deleting it
/// (an upload's input is deleted once read) gives its space back.
pub(crate) const MAX_BODY: usize = 1 << 20;

/// A segment being compacted, renamed over the segment when whole.
const COMPACTING: &str = "@segment.new";

/// Dead bytes below which a segment is not compacted, whatever their share.
const COMPACT_AT: u64 = 1 << 20;

const MAGIC: [u8; 4] = *b"SCS1";
/// Magic, checksum, name length, body length, kind.
const HEADER: usize = 4 + 4 + 2 + 4 + 1;
const MAX_NAME: usize = 1024;
const BLOB: u8 = 1;
const DELETED: u8 = 0;

/// Where a name's latest record is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Slot {
    /// A body: the record starts at `at` and is `len` bytes long in all.
    Blob { at: u64, len: u32 },
    /// The name was deleted.
    Deleted,
}

impl Slot {
    /// The bytes of the segment the slot keeps alive.
    fn bytes(&self) -> u64 {
        match self {
            Slot::Blob { len, .. } => u64::from(*len),
            Slot::Deleted => 0,
        }
    }
}

/// The index of a segment: where each name's latest record is.
pub(crate) type Index = HashMap<String, Slot>;

/// One directory's segment, as its writer needs it: the open file and where its records end.
pub(crate) struct Segment {
    path: PathBuf,
    /// Opened to read and append; `None` until the first record is written.
    file: Option<Arc<File>>,
    /// Where the whole records end.
    len: u64,
    /// Where the file ends: past `len` when bytes that are no whole record follow them.
    end: u64,
    /// Bytes of records that no longer count: bodies replaced or deleted, and the deletions.
    dead: u64,
}

impl Segment {
    /// Loads the segment of `dir` (empty when there is none) and its index. Loading writes
    /// nothing: a process that only reads may load a segment another is writing.
    pub(crate) fn load(dir: &Path) -> io::Result<(Segment, Index)> {
        let path = dir.join(FILE_NAME);
        let file = match OpenOptions::new().read(true).append(true).open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let empty = Segment {
                    path,
                    file: None,
                    len: 0,
                    end: 0,
                    dead: 0,
                };
                return Ok((empty, Index::new()));
            }
            Err(e) => return Err(e),
        };
        let end = file.metadata()?.len();
        let mut records = headers(&file, end)?;
        // A crash can leave the last record's length on disk and not all of its bytes.
        if let Some(last) = records.last() {
            if read_record(&file, last.at, last.len).is_err() {
                records.pop();
            }
        }
        let len = records.last().map_or(0, |r| r.at + u64::from(r.len));
        let index: Index = records.into_iter().map(Record::into_entry).collect();
        let segment = Segment {
            path,
            file: Some(Arc::new(file)),
            len,
            end,
            dead: len - index.values().map(Slot::bytes).sum::<u64>(),
        };
        Ok((segment, index))
    }

    /// The file to read slots from.
    pub(crate) fn file(&self) -> Option<Arc<File>> {
        self.file.clone()
    }

    /// Appends a record of `name`: its body, or its deletion when `body` is `None`; where it
    /// is. `before` is where the name's record was.
    pub(crate) fn append(
        &mut self,
        name: &str,
        body: Option<&[u8]>,
        before: Option<Slot>,
    ) -> io::Result<Slot> {
        let record = encode(name, body)?;
        let file = match &self.file {
            Some(file) => file.clone(),
            None => {
                if let Some(dir) = self.path.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                let file = OpenOptions::new()
                    .read(true)
                    .append(true)
                    .create(true)
                    .open(&self.path)?;
                self.len = file.metadata()?.len();
                self.end = self.len;
                let file = Arc::new(file);
                self.file = Some(file.clone());
                file
            }
        };
        if self.end > self.len {
            if record_after(&file, self.len + 1, self.end)? {
                self.keep_damaged(&file)?;
            }
            tracing::warn!(path = %self.path.display(), kept = self.len, "segment: torn tail cut off");
            file.set_len(self.len)?;
            self.end = self.len;
        }
        if let Err(e) = (&*file).write_all(&record) {
            // A record half written would hide every one after it: take it back.
            let _ = file.set_len(self.len);
            return Err(e);
        }
        let len = record.len() as u32;
        let slot = match body {
            Some(_) => Slot::Blob { at: self.len, len },
            None => Slot::Deleted,
        };
        self.len += u64::from(len);
        self.end = self.len;
        self.dead += before.map_or(0, |b| b.bytes()) + u64::from(len) - slot.bytes();
        Ok(slot)
    }

    /// Copies the bytes past the last whole record to a file beside the segment: they hold
    /// records a damaged one hides.
    fn keep_damaged(&self, file: &File) -> io::Result<()> {
        let kept = self
            .path
            .with_file_name(format!("{FILE_NAME}.damaged-{}", self.len));
        let mut from = file;
        from.seek(SeekFrom::Start(self.len))?;
        io::copy(
            &mut from.take(self.end - self.len),
            &mut File::create(&kept)?,
        )?;
        tracing::error!(
            path = %self.path.display(),
            at = self.len,
            kept = %kept.display(),
            "segment: a damaged record hides the records after it; their bytes are kept aside"
        );
        Ok(())
    }

    /// Whether most of the segment is records that no longer count (a blob written over and
    /// over, as a monitor's snapshot is), enough of them to be worth copying the rest.
    pub(crate) fn wasteful(&self) -> bool {
        self.dead >= COMPACT_AT && self.dead * 2 > self.len
    }

    /// Copies the bodies `index` points at into a new segment that replaces this one, and
    /// returns its index. Readers holding the old file read it to the end; deletions are
    /// dropped (a name deleted and a name never written read alike).
    pub(crate) fn compact(&mut self, index: &Index) -> io::Result<Index> {
        let Some(from) = self.file.clone() else {
            return Ok(index.clone());
        };
        let new = self.path.with_file_name(COMPACTING);
        let mut out = io::BufWriter::new(File::create(&new)?);
        // The handle the segment goes on with, open before the rename so nothing after it
        // can fail.
        let kept = OpenOptions::new().read(true).append(true).open(&new)?;
        let mut compacted = Index::with_capacity(index.len());
        let mut at = 0u64;
        let mut record = Vec::new();
        for (name, slot) in index {
            if let Slot::Blob { at: was, len } = *slot {
                record.resize(len as usize, 0);
                from.read_exact_at(&mut record, was)?;
                out.write_all(&record)?;
                compacted.insert(name.clone(), Slot::Blob { at, len });
                at += u64::from(len);
            }
        }
        out.into_inner().map_err(io::IntoInnerError::into_error)?;
        std::fs::rename(&new, &self.path)?;
        self.file = Some(Arc::new(kept));
        self.len = at;
        self.end = at;
        self.dead = 0;
        Ok(compacted)
    }
}

/// Whether a record's magic starts between `from` and `end`: the bytes there are more than
/// the torn end of one record.
fn record_after(file: &File, from: u64, end: u64) -> io::Result<bool> {
    let mut chunk = vec![0; 64 * 1024];
    let mut at = from;
    while at < end {
        let n = chunk.len().min((end - at) as usize);
        file.read_exact_at(&mut chunk[..n], at)?;
        if chunk[..n].windows(MAGIC.len()).any(|w| w == MAGIC) {
            return Ok(true);
        }
        if at + n as u64 >= end {
            break;
        }
        // A magic across two chunks is found in the next one.
        at += (n - (MAGIC.len() - 1)) as u64;
    }
    Ok(false)
}

/// The body of the record at `at`, `len` bytes long, checked against its checksum.
pub(crate) fn read_record(file: &File, at: u64, len: u32) -> io::Result<Bytes> {
    let mut record = vec![0; len as usize];
    file.read_exact_at(&mut record, at)?;
    let header = parse_header(&record).ok_or_else(|| corrupt(at, "header"))?;
    if header.total() != len as usize || checksum(&record[8..]) != header.crc {
        return Err(corrupt(at, "checksum"));
    }
    Ok(Bytes::from(record).slice(HEADER + header.name_len..))
}

/// One record's header.
struct Header {
    crc: u32,
    name_len: usize,
    body_len: usize,
    kind: u8,
}

impl Header {
    fn total(&self) -> usize {
        HEADER + self.name_len + self.body_len
    }
}

fn parse_header(bytes: &[u8]) -> Option<Header> {
    let bytes: &[u8; HEADER] = bytes.get(..HEADER)?.try_into().ok()?;
    let [m0, m1, m2, m3, c0, c1, c2, c3, n0, n1, b0, b1, b2, b3, kind] = *bytes;
    let header = Header {
        crc: u32::from_le_bytes([c0, c1, c2, c3]),
        name_len: usize::from(u16::from_le_bytes([n0, n1])),
        body_len: u32::from_le_bytes([b0, b1, b2, b3]) as usize,
        kind,
    };
    let valid = [m0, m1, m2, m3] == MAGIC
        && (1..=MAX_NAME).contains(&header.name_len)
        && header.body_len <= MAX_BODY
        && (kind == BLOB || (kind == DELETED && header.body_len == 0));
    valid.then_some(header)
}

/// A record as its header describes it.
struct Record {
    name: String,
    at: u64,
    len: u32,
    kind: u8,
}

impl Record {
    /// The record as the index keeps it.
    fn into_entry(self) -> (String, Slot) {
        let slot = match self.kind {
            BLOB => Slot::Blob {
                at: self.at,
                len: self.len,
            },
            _ => Slot::Deleted,
        };
        (self.name, slot)
    }
}

/// The records whose headers and names are whole, in order, up to the first that is not.
fn headers(file: &File, end: u64) -> io::Result<Vec<Record>> {
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let mut records = Vec::new();
    let mut at = 0u64;
    let mut head = [0u8; HEADER];
    while end - at >= HEADER as u64 {
        reader.read_exact(&mut head)?;
        let Some(header) = parse_header(&head) else {
            break;
        };
        let len = header.total() as u64;
        if at + len > end {
            break;
        }
        let mut name = vec![0; header.name_len];
        reader.read_exact(&mut name)?;
        let Ok(name) = String::from_utf8(name) else {
            break;
        };
        reader.seek_relative(header.body_len as i64)?;
        records.push(Record {
            name,
            at,
            len: len as u32,
            kind: header.kind,
        });
        at += len;
    }
    Ok(records)
}

fn encode(name: &str, body: Option<&[u8]>) -> io::Result<Vec<u8>> {
    let body_bytes = body.unwrap_or_default();
    if name.is_empty() || name.len() > MAX_NAME || body_bytes.len() > MAX_BODY {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "segment: name or body out of bounds",
        ));
    }
    let mut record = Vec::with_capacity(HEADER + name.len() + body_bytes.len());
    record.extend_from_slice(&MAGIC);
    record.extend_from_slice(&[0; 4]);
    record.extend_from_slice(&(name.len() as u16).to_le_bytes());
    record.extend_from_slice(&(body_bytes.len() as u32).to_le_bytes());
    record.push(if body.is_some() { BLOB } else { DELETED });
    record.extend_from_slice(name.as_bytes());
    record.extend_from_slice(body_bytes);
    let crc = checksum(&record[8..]);
    record[4..8].copy_from_slice(&crc.to_le_bytes());
    Ok(record)
}

fn checksum(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

fn corrupt(at: u64, what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("segment record at {at}: bad {what}"),
    )
}
