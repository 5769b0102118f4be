//! The document store over the data directory: segments, their restarts and damage, large
//! blobs as files.

use bytes::Bytes;
use sarvcrawl_core::ports::{BlobStore, SystemClock};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Something done to a segment file behind the store's back.
type Damage = fn(&Path) -> Result<()>;

fn open(dir: &Path) -> Arc<dyn BlobStore> {
    match sarvcrawl_local::open(dir, Duration::from_secs(1), Arc::new(SystemClock)) {
        Ok(local) => local.blobs,
        Err(e) => panic!("open {}: {e}", dir.display()),
    }
}

fn segment(dir: &Path, job: &str) -> PathBuf {
    dir.join("documents/u").join(job).join("@segment")
}

fn body(i: usize) -> Bytes {
    Bytes::from(format!(
        "{{\"page\":{i},\"text\":\"{}\"}}",
        "x".repeat(i * 7 % 300)
    ))
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn blobs_round_trip_and_refuse_escaping_keys() {
    let dir = tempfile::tempdir().unwrap();
    let blobs = open(dir.path());
    blobs
        .put("u/job/doc.json", Bytes::from_static(b"{}"))
        .await
        .unwrap();
    assert_eq!(
        blobs.get("u/job/doc.json").await.unwrap().unwrap(),
        &b"{}"[..]
    );
    assert!(blobs.get("u/job/none.json").await.unwrap().is_none());
    for bad in ["../x", "u/../../x", "/abs", "a//b", "", "u/job/@segment"] {
        assert!(blobs.put(bad, Bytes::new()).await.is_err(), "{bad}");
        assert!(blobs.get(bad).await.is_err(), "{bad}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_documents_of_one_directory_and_of_many_are_all_written_whole() {
    let dir = tempfile::tempdir().unwrap();
    let blobs = open(dir.path());
    let mut puts = tokio::task::JoinSet::new();
    for i in 0..200usize {
        let blobs = blobs.clone();
        puts.spawn(async move {
            let key = format!("u/job{}/doc{i}.json", i % 3);
            let body = Bytes::from(vec![b'a' + (i % 26) as u8; 10_000 + i]);
            blobs.put(&key, body.clone()).await.unwrap();
            (key, body)
        });
    }
    while let Some(put) = puts.join_next().await {
        let (key, body) = put.unwrap();
        assert_eq!(blobs.get(&key).await.unwrap().unwrap(), body, "{key}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_directorys_documents_are_one_file_read_back_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let blobs = open(dir.path());
        for i in 0..100 {
            blobs
                .put(&format!("u/job/{i}.json"), body(i))
                .await
                .unwrap();
        }
        blobs
            .put("u/job/5.json", Bytes::from_static(b"again"))
            .await
            .unwrap();
        blobs.delete("u/job/7.json").await.unwrap();
        blobs.delete("u/job/never.json").await.unwrap();
        // More directories than are kept loaded: the first is read again from its file.
        for j in 0..80 {
            blobs
                .put(&format!("u/other{j}/a.json"), body(j))
                .await
                .unwrap();
        }
        assert_eq!(blobs.get("u/job/9.json").await.unwrap().unwrap(), body(9));
        assert_eq!(blobs.get("u/job/5.json").await.unwrap().unwrap(), "again");
        assert!(blobs.get("u/job/7.json").await.unwrap().is_none());
    }
    assert_eq!(files_in(&dir.path().join("documents/u/job")), ["@segment"]);
    let blobs = open(dir.path());
    for i in (0..100).filter(|i| ![5, 7].contains(i)) {
        let got = blobs.get(&format!("u/job/{i}.json")).await.unwrap();
        assert_eq!(got.unwrap(), body(i), "{i}");
    }
    assert_eq!(blobs.get("u/job/5.json").await.unwrap().unwrap(), "again");
    assert!(blobs.get("u/job/7.json").await.unwrap().is_none());
    assert!(blobs.get("u/job/never.json").await.unwrap().is_none());
    for j in 0..80 {
        let got = blobs.get(&format!("u/other{j}/a.json")).await.unwrap();
        assert_eq!(got.unwrap(), body(j), "{j}");
    }
}

/// Writes three documents, lets `damage` do its worst to the segment, and returns the store
/// opened again.
async fn damaged(dir: &Path, damage: Damage) -> Result<Arc<dyn BlobStore>> {
    {
        let blobs = open(dir);
        for i in 0..3 {
            blobs.put(&format!("u/job/{i}.json"), body(i)).await?;
        }
    }
    damage(&segment(dir, "job"))?;
    Ok(open(dir))
}

fn append(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut file = std::fs::OpenOptions::new().append(true).open(path)?;
    Ok(file.write_all(bytes)?)
}

/// Writes `bytes` over the file's own, `from_end` bytes before its end.
fn overwrite(path: &Path, from_end: u64, bytes: &[u8]) -> Result<()> {
    let len = std::fs::metadata(path)?.len();
    let file = std::fs::OpenOptions::new().write(true).open(path)?;
    Ok(file.write_all_at(bytes, len - from_end)?)
}

fn tear(path: &Path) -> Result<()> {
    let len = std::fs::metadata(path)?.len();
    let file = std::fs::OpenOptions::new().write(true).open(path)?;
    Ok(file.set_len(len - 5)?)
}

fn zeros(path: &Path) -> Result<()> {
    append(path, &[0; 4096])
}

fn torn_header(path: &Path) -> Result<()> {
    append(path, b"SCS1\x01\x02")
}

/// The length went to disk and the last bytes did not: they read as zeros.
fn unwritten_body(path: &Path) -> Result<()> {
    overwrite(path, 8, &[0; 8])
}

#[tokio::test]
async fn a_torn_last_record_is_cut_off_and_what_follows_it_is_kept() {
    let cases: [(&str, Damage, usize); 4] = [
        ("torn", tear, 2),
        ("zeros", zeros, 3),
        ("header", torn_header, 3),
        ("unwritten", unwritten_body, 2),
    ];
    for (name, damage, kept) in cases {
        let dir = tempfile::tempdir().unwrap();
        let blobs = damaged(dir.path(), damage).await.unwrap();
        for i in 0..3 {
            let got = blobs.get(&format!("u/job/{i}.json")).await.unwrap();
            assert_eq!(got, (i < kept).then(|| body(i)), "{name} {i}");
        }
        blobs.put("u/job/after.json", body(50)).await.unwrap();
        // Only the end of one record was cut: nothing is kept aside.
        let job = dir.path().join("documents/u/job");
        assert_eq!(files_in(&job), ["@segment"], "{name}");
        drop(blobs);
        let blobs = open(dir.path());
        let after = blobs.get("u/job/after.json").await.unwrap();
        assert_eq!(after.unwrap(), body(50), "{name}");
        for i in 0..kept {
            let got = blobs.get(&format!("u/job/{i}.json")).await.unwrap();
            assert_eq!(got.unwrap(), body(i), "{name} {i}");
        }
    }
}

#[tokio::test]
async fn records_hidden_by_a_damaged_header_are_kept_aside_not_cut_off() {
    let dir = tempfile::tempdir().unwrap();
    // The second record starts after the first's header (15 bytes), name and body.
    fn first() -> u64 {
        (15 + "0.json".len() + body(0).len()) as u64
    }
    // Its magic, so the third record can no longer be found from the start.
    let blobs = damaged(dir.path(), |path| {
        let file = std::fs::OpenOptions::new().write(true).open(path)?;
        Ok(file.write_all_at(b"X", first())?)
    })
    .await
    .unwrap();
    assert_eq!(blobs.get("u/job/0.json").await.unwrap().unwrap(), body(0));
    assert!(blobs.get("u/job/2.json").await.unwrap().is_none());
    blobs.put("u/job/after.json", body(50)).await.unwrap();
    let job = dir.path().join("documents/u/job");
    let aside = format!("@segment.damaged-{}", first());
    assert_eq!(files_in(&job), ["@segment", aside.as_str()]);
    let kept = std::fs::read(job.join(&aside)).unwrap();
    let third = String::from_utf8_lossy(&kept);
    assert!(
        third.ends_with(std::str::from_utf8(&body(2)).unwrap()),
        "{third}"
    );
    drop(blobs);
    let blobs = open(dir.path());
    assert_eq!(blobs.get("u/job/0.json").await.unwrap().unwrap(), body(0));
    assert_eq!(
        blobs.get("u/job/after.json").await.unwrap().unwrap(),
        body(50)
    );
}

#[tokio::test]
async fn a_damaged_document_is_an_error_never_other_bytes() {
    let dir = tempfile::tempdir().unwrap();
    // A byte of the second document's body, 3 bytes before the third's record (a header of
    // 15 bytes, its name and its body).
    let blobs = damaged(dir.path(), |path| {
        let third = 15 + "2.json".len() + body(2).len();
        overwrite(path, third as u64 + 3, b"#")
    })
    .await
    .unwrap();
    assert_eq!(blobs.get("u/job/0.json").await.unwrap().unwrap(), body(0));
    assert!(blobs.get("u/job/1.json").await.is_err());
    assert_eq!(blobs.get("u/job/2.json").await.unwrap().unwrap(), body(2));
}

#[tokio::test]
async fn a_large_blob_is_a_file_that_replaces_and_is_replaced_by_a_small_one() {
    let dir = tempfile::tempdir().unwrap();
    let blobs = open(dir.path());
    let job = dir.path().join("documents/u/job");
    let large = Bytes::from(vec![b'L'; (1 << 20) + 1]);
    let key = "u/job/upload";
    blobs.put(key, Bytes::from_static(b"small")).await.unwrap();
    blobs.put(key, large.clone()).await.unwrap();
    assert_eq!(blobs.get(key).await.unwrap().unwrap(), large);
    assert_eq!(files_in(&job), ["@segment", "upload"]);
    blobs
        .put(key, Bytes::from_static(b"small again"))
        .await
        .unwrap();
    assert_eq!(blobs.get(key).await.unwrap().unwrap(), "small again");
    assert_eq!(files_in(&job), ["@segment"], "the large body's file goes");
    blobs.put(key, large.clone()).await.unwrap();
    blobs.delete(key).await.unwrap();
    assert!(blobs.get(key).await.unwrap().is_none());
    assert_eq!(files_in(&job), ["@segment"]);
    // The segment holds the small bodies and their deletions, never the large one.
    assert!(std::fs::metadata(job.join("@segment")).unwrap().len() < 200);
}

#[tokio::test]
async fn documents_written_as_files_before_segments_are_still_read_and_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("documents/u/job");
    std::fs::create_dir_all(&job).unwrap();
    std::fs::write(job.join("old.json"), b"{\"old\":true}").unwrap();
    let blobs = open(dir.path());
    let old = blobs.get("u/job/old.json").await.unwrap();
    assert_eq!(old.unwrap(), &b"{\"old\":true}"[..]);
    blobs.put("u/job/new.json", body(1)).await.unwrap();
    blobs.delete("u/job/old.json").await.unwrap();
    assert!(blobs.get("u/job/old.json").await.unwrap().is_none());
    assert_eq!(files_in(&job), ["@segment"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_blob_written_over_and_over_leaves_its_segment_small() {
    let dir = tempfile::tempdir().unwrap();
    let path = segment(dir.path(), "monitor");
    let snapshot = |n: usize| Bytes::from(format!("{n:08}").repeat(8 * 1024));
    {
        let blobs = open(dir.path());
        for i in 0..10 {
            let key = format!("u/monitor/{i}.json");
            blobs.put(&key, body(i)).await.unwrap();
        }
        // A reader all along: compactions move the documents under it.
        let reader = {
            let blobs = blobs.clone();
            tokio::spawn(async move {
                for _ in 0..2000 {
                    let got = blobs.get("u/monitor/5.json").await.unwrap();
                    assert_eq!(got.unwrap(), body(5));
                    tokio::task::yield_now().await;
                }
            })
        };
        let mut largest = 0;
        for n in 0..200 {
            blobs
                .put("u/monitor/snapshot.md", snapshot(n))
                .await
                .unwrap();
            if n % 3 == 0 {
                blobs.delete("u/monitor/0.json").await.unwrap();
                blobs.put("u/monitor/0.json", body(n)).await.unwrap();
            }
            largest = largest.max(std::fs::metadata(&path).unwrap().len());
            let got = blobs.get("u/monitor/snapshot.md").await.unwrap();
            assert_eq!(got.unwrap(), snapshot(n), "{n}");
        }
        // 200 snapshots of 64 KiB were written (12.5 MiB); at most 1 MiB of them is dead
        // before half the segment is.
        assert!(largest < 2_500_000, "the segment grew to {largest} bytes");
        reader.await.unwrap();
    }
    let blobs = open(dir.path());
    let snap = blobs.get("u/monitor/snapshot.md").await.unwrap();
    assert_eq!(snap.unwrap(), snapshot(199));
    assert_eq!(
        blobs.get("u/monitor/0.json").await.unwrap().unwrap(),
        body(198)
    );
    for i in 1..10 {
        let got = blobs.get(&format!("u/monitor/{i}.json")).await.unwrap();
        assert_eq!(got.unwrap(), body(i), "{i}");
    }
    assert_eq!(
        files_in(&dir.path().join("documents/u/monitor")),
        ["@segment"]
    );
}
