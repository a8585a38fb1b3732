//! Folder notes: `AGENTS.md` then `FLYCODE.md` at each allowed root, read through the sandbox
//! (a link leading out of the roots is not followed) afresh for every request. A file that is
//! missing, unreadable, not a regular file or not UTF-8 is skipped without a word; a longer one
//! is cut at [`FOLDER_NOTE_CAP`] bytes, at a line end when there is one, with a line saying so.

use std::io::Read;

use crate::sandbox::Sandbox;

/// The names read at each root, in order.
pub const FOLDER_NOTE_NAMES: [&str; 2] = ["AGENTS.md", "FLYCODE.md"];

/// The most bytes of one folder note that are sent.
pub const FOLDER_NOTE_CAP: usize = 32 * 1024;

/// One folder note file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FolderNote {
    /// The file's absolute path, in display form.
    pub path: String,
    /// Its text, cut at [`FOLDER_NOTE_CAP`] bytes with a last line saying so.
    pub text: String,
}

/// Reads the folder notes of every root of `sandbox`, in root order, `AGENTS.md` before
/// `FLYCODE.md`.
pub fn folder_notes(sandbox: &Sandbox) -> Vec<FolderNote> {
    let mut notes = Vec::new();
    for root in sandbox.roots() {
        for name in FOLDER_NOTE_NAMES {
            let Some(path) = root.join(name).to_str().map(str::to_owned) else {
                continue;
            };
            if let Some(text) = read_note(sandbox, &path) {
                notes.push(FolderNote { path, text });
            }
        }
    }
    notes
}

fn read_note(sandbox: &Sandbox, path: &str) -> Option<String> {
    let file = sandbox.open_for_reading(path).ok()?;
    let size = file.metadata().ok()?.len();
    let mut bytes = Vec::new();
    file.take(FOLDER_NOTE_CAP as u64 + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    if bytes.len() <= FOLDER_NOTE_CAP {
        return String::from_utf8(bytes).ok();
    }
    bytes.truncate(FOLDER_NOTE_CAP);
    let mut text = match String::from_utf8(bytes) {
        Ok(text) => text,
        // Only a character split by the cut may be incomplete; anything else is not UTF-8.
        Err(error) if error.utf8_error().error_len().is_none() => {
            let valid = error.utf8_error().valid_up_to();
            let mut bytes = error.into_bytes();
            bytes.truncate(valid);
            String::from_utf8(bytes).ok()?
        }
        Err(_) => return None,
    };
    if let Some(line_end) = text.rfind('\n') {
        text.truncate(line_end + 1);
    } else {
        text.push('\n');
    }
    let size = size.max(FOLDER_NOTE_CAP as u64 + 1);
    text.push_str(&format!(
        "[flycode: cut here at {} KiB; the file has {size} bytes. Read the rest of it with the file tools if you need it.]\n",
        FOLDER_NOTE_CAP / 1024
    ));
    Some(text)
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // fixtures are made directly, outside the sandbox
mod tests {
    use super::*;
    use crate::sandbox::roots::Roots;
    use std::path::PathBuf;

    fn sandbox(dirs: &[PathBuf]) -> Sandbox {
        Sandbox::open(&Roots::resolve(dirs).unwrap()).unwrap()
    }

    #[test]
    fn reads_agents_then_flycode_at_each_root_in_root_order() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::write(a.path().join("FLYCODE.md"), "a flycode\n").unwrap();
        std::fs::write(a.path().join("AGENTS.md"), "a agents\n").unwrap();
        std::fs::write(b.path().join("AGENTS.md"), "b agents\n").unwrap();
        let notes = folder_notes(&sandbox(&[a.path().into(), b.path().into()]));
        let texts: Vec<&str> = notes.iter().map(|n| n.text.as_str()).collect();
        assert_eq!(texts, ["a agents\n", "a flycode\n", "b agents\n"]);
        assert!(notes[0].path.ends_with("AGENTS.md"));
        assert!(PathBuf::from(&notes[2].path).is_absolute());
    }

    #[test]
    fn missing_non_utf8_and_directory_notes_are_skipped() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("AGENTS.md"), b"\xff\xfe bad").unwrap();
        std::fs::create_dir(root.path().join("FLYCODE.md")).unwrap();
        assert!(folder_notes(&sandbox(&[root.path().into()])).is_empty());
    }

    #[cfg(unix)]
    #[test]
    fn a_link_leading_out_of_the_roots_is_not_read() {
        let (root, outside) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::write(outside.path().join("secret.md"), "secret").unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("secret.md"),
            root.path().join("AGENTS.md"),
        )
        .unwrap();
        std::fs::write(root.path().join("inner.md"), "inner").unwrap();
        std::os::unix::fs::symlink("inner.md", root.path().join("FLYCODE.md")).unwrap();
        let notes = folder_notes(&sandbox(&[root.path().into()]));
        let texts: Vec<&str> = notes.iter().map(|n| n.text.as_str()).collect();
        assert_eq!(texts, ["inner"]);
    }

    #[test]
    fn a_long_note_is_cut_at_a_line_end_with_a_line_saying_so() {
        let root = tempfile::tempdir().unwrap();
        let line = "é".repeat(50) + "\n";
        let text = line.repeat(1000);
        std::fs::write(root.path().join("AGENTS.md"), &text).unwrap();
        let notes = folder_notes(&sandbox(&[root.path().into()]));
        let note = &notes[0].text;
        let (kept, marker) = note.trim_end().rsplit_once('\n').unwrap();
        assert!(kept.len() <= FOLDER_NOTE_CAP);
        assert!(text.starts_with(kept));
        assert!(kept.ends_with('é'));
        assert_eq!(
            marker,
            format!(
                "[flycode: cut here at 32 KiB; the file has {} bytes. Read the rest of it with the file tools if you need it.]",
                text.len()
            )
        );
    }

    #[test]
    fn a_long_line_is_cut_on_a_character_boundary() {
        let root = tempfile::tempdir().unwrap();
        // One ASCII byte first, so the cut at an even offset splits an "é".
        std::fs::write(
            root.path().join("AGENTS.md"),
            "x".to_owned() + &"é".repeat(20_000),
        )
        .unwrap();
        let notes = folder_notes(&sandbox(&[root.path().into()]));
        let kept = notes[0].text.split('\n').next().unwrap();
        assert_eq!(kept.len(), FOLDER_NOTE_CAP - 1);
        assert!(kept[1..].chars().all(|c| c == 'é'));
    }
}
