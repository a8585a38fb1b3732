//! How many flushes a write, an edit's write and a batch make (PROTOCOL.md §9 (fs.write), "What
//! is synced"), counted by [`super::durability`]'s test hook; apart from it so that the
//! durability module imports nothing of the sandbox.

use std::path::{Path, PathBuf};

use super::durability::{Durability, count};
use crate::{BatchFile, Roots, Sandbox, WriteMode};

fn setup() -> (tempfile::TempDir, PathBuf, Sandbox) {
    let temp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(temp.path()).unwrap();
    let sandbox = Sandbox::open(&Roots::resolve(std::slice::from_ref(&root)).unwrap()).unwrap();
    (temp, root, sandbox)
}

fn write(sandbox: &Sandbox, path: &Path, content: &str) {
    sandbox
        .write_file(
            &path.display().to_string(),
            content.as_bytes(),
            WriteMode::Overwrite,
            None,
        )
        .unwrap()
        .unwrap();
}

fn batch(root: &Path, names: &[&str], content: &str) -> Vec<BatchFile> {
    names
        .iter()
        .map(|name| BatchFile {
            path: root.join(name).display().to_string(),
            content: content.as_bytes().to_vec(),
            mode: WriteMode::Overwrite,
            expected_sha256: None,
        })
        .collect()
}

#[test]
fn a_write_flushes_the_file_and_its_folder_once_each() {
    let (_t, root, sandbox) = setup();
    let file = root.join("a.txt");
    assert_eq!(count::during(|| write(&sandbox, &file, "new")), 2);
    assert_eq!(count::during(|| write(&sandbox, &file, "replaced")), 2);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "replaced");
}

#[test]
fn a_batch_flushes_each_file_its_replacing_record_and_each_folder_once() {
    let (_t, root, sandbox) = setup();
    std::fs::create_dir(root.join("sub")).unwrap();
    std::fs::write(root.join("b.txt"), "old").unwrap();
    // Three files in one folder: three temporary files, the "replacing" record and the
    // journal's folder, and the one folder.
    let files = batch(&root, &["a.txt", "b.txt", "c.txt"], "x");
    let syncs = count::during(|| {
        sandbox.write_batch(&files).unwrap().unwrap();
    });
    assert_eq!(syncs, 3 + 2 + 1);
    // Two folders: two folder flushes.
    let files = batch(&root, &["a.txt", "sub/d.txt", "sub/e.txt"], "y");
    let syncs = count::during(|| {
        sandbox.write_batch(&files).unwrap().unwrap();
    });
    assert_eq!(syncs, 3 + 2 + 2);
    assert_eq!(
        std::fs::read_to_string(root.join("sub/e.txt")).unwrap(),
        "y"
    );
}

#[test]
fn process_durability_flushes_nothing_and_still_writes() {
    let (_t, root, sandbox) = setup();
    let sandbox = sandbox.with_durability(Durability::Process);
    let file = root.join("a.txt");
    assert_eq!(count::during(|| write(&sandbox, &file, "new")), 0);
    let files = batch(&root, &["a.txt", "b.txt", "c.txt"], "z");
    let syncs = count::during(|| {
        sandbox.write_batch(&files).unwrap().unwrap();
    });
    assert_eq!(syncs, 0);
    for name in ["a.txt", "b.txt", "c.txt"] {
        assert_eq!(std::fs::read_to_string(root.join(name)).unwrap(), "z");
    }
}

#[test]
fn the_setting_words_round_trip() {
    for durability in [Durability::Full, Durability::Process] {
        let text = serde_json::to_string(&durability).unwrap();
        assert_eq!(text, format!("\"{}\"", durability.as_str()));
    }
    assert_eq!(Durability::default(), Durability::Full);
}

#[test]
fn recording_a_change_flushes_each_content_once_and_each_folder_once() {
    use crate::undo::{Named, Recorder, UndoLimits, UndoStore};
    let (_t, root, sandbox) = setup();
    let state = tempfile::tempdir().unwrap();
    let recorder = Recorder::new(
        UndoStore::at(&state.path().join("undo"), Durability::Full),
        "exec",
        UndoLimits::default(),
    );
    let olds = ["old a\n", "old b\n", "old c\n"];
    let paths: Vec<String> = ["a.txt", "b.txt", "c.txt"]
        .iter()
        .zip(olds)
        .map(|(name, old)| {
            std::fs::write(root.join(name), old).unwrap();
            root.join(name).display().to_string()
        })
        .collect();
    let named: Vec<Named<'_>> = paths
        .iter()
        .map(|input| Named {
            input,
            whole: false,
            deep: false,
            replaced: false,
            appended: false,
        })
        .collect();
    let mut pending = None;
    let before = count::during(|| {
        pending = Some(recorder.begin(&sandbox, "fs.write", None, &named).unwrap());
    });
    // Each content's data, the record's, then blobs/ and changes/ (the record under way):
    // one folder for the contents however many there are.
    assert_eq!(before, 3 + 1 + 2);
    for path in &paths {
        std::fs::write(path, "new\n").unwrap();
    }
    // Nothing on the call's path: the completed record is readable at once and flushed after
    // the call has answered, on a thread of its own.
    let mut id = None;
    let after = count::during(|| {
        id = recorder
            .finish(pending.take().unwrap(), &Default::default())
            .unwrap();
    });
    assert_eq!(after, 0);
    let id = id.unwrap();
    assert!(recorder.store().record(&id).unwrap().complete);
    crate::undo::wait_for_completions();
    // On the disk under its finished name, nothing under way left.
    let changes = state.path().join("undo/changes");
    let mut names: Vec<String> = std::fs::read_dir(&changes)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, [format!("{id}.json")]);
    assert!(recorder.store().record(&id).unwrap().complete);
}

#[test]
fn recording_a_replacing_change_links_the_old_file_and_takes_the_reported_hash() {
    use crate::undo::{Named, Recorder, UndoLimits, UndoStore};
    let (_t, root, sandbox) = setup();
    let state = tempfile::tempdir().unwrap();
    let recorder = Recorder::new(
        UndoStore::at(&state.path().join("undo"), Durability::Full),
        "exec",
        UndoLimits::default(),
    );
    std::fs::write(root.join("a.txt"), "old a\n").unwrap();
    let input = root.join("a.txt").display().to_string();
    let named = [Named {
        input: &input,
        whole: false,
        deep: false,
        replaced: true,
        appended: false,
    }];
    let mut pending = None;
    let before = count::during(|| {
        pending = Some(recorder.begin(&sandbox, "fs.write", None, &named).unwrap());
    });
    // The old file is linked, not copied: its own data (nothing to write if it is on the disk
    // already), the record's, then blobs/ and changes/.
    assert_eq!(before, 1 + 1 + 2);
    sandbox
        .write_file(&input, b"new a\n", WriteMode::Overwrite, None)
        .unwrap()
        .unwrap();
    let hash = super::content_hash::sha256_hex(b"old a\n");
    let blob = state.path().join("undo/blobs").join(&hash);
    assert_eq!(std::fs::read(&blob).unwrap(), b"old a\n");
    // The after-image takes the hash the tool reported for the path rather than hashing the
    // file again (a made-up one here, to tell the two apart).
    let reported = "ab".repeat(32);
    let written = std::collections::BTreeMap::from([(input.clone(), reported.clone())]);
    assert!(
        recorder
            .finish(pending.take().unwrap(), &written)
            .unwrap()
            .is_some()
    );
    let (records, _) = recorder.store().records();
    let after = records[0].paths[0].after.as_ref().unwrap();
    assert!(
        matches!(after, crate::undo::Image::File { sha256, .. } if *sha256 == reported),
        "{after:?}"
    );
}

#[test]
fn flushes_made_together_are_all_made_and_counted_on_the_caller_s_thread() {
    use super::durability::{Flush, sync_at_once};
    use std::os::fd::AsFd;
    let temp = tempfile::tempdir().unwrap();
    let files: Vec<std::fs::File> = (0..11)
        .map(|n| {
            let path = temp.path().join(format!("f{n}"));
            std::fs::write(&path, format!("{n}\n")).unwrap();
            std::fs::File::open(path).unwrap()
        })
        .collect();
    let folder = std::fs::File::open(temp.path()).unwrap();
    let flushes: Vec<Flush<'_>> = files
        .iter()
        .map(|file| Flush::Data(file.as_fd()))
        .chain(std::iter::once(Flush::Dir(folder.as_fd())))
        .collect();
    let syncs = count::during(|| sync_at_once(&flushes, Durability::Full).unwrap());
    assert_eq!(syncs, 12);
    assert_eq!(
        count::during(|| sync_at_once(&flushes, Durability::Process).unwrap()),
        0
    );
    // One that fails (a pipe has no data to flush) is the error, after all the others ran.
    let (reader, _writer) = std::io::pipe().unwrap();
    let mut with_pipe = flushes.clone();
    with_pipe.insert(3, Flush::Data(reader.as_fd()));
    let mut outcome = Ok(());
    let syncs = count::during(|| outcome = sync_at_once(&with_pipe, Durability::Full));
    assert_eq!(syncs, 13);
    assert_eq!(
        outcome.unwrap_err().kind(),
        std::io::ErrorKind::InvalidInput,
        "fdatasync of a pipe is EINVAL"
    );
}
