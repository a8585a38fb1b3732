//! Runs of backticks: the longest one in a text chooses the fence of the block that holds it
//! (PROTOCOL.md §4 (The result block)), so every result and every large read looks for it.
//!
//! Only runs longer than the longest found so far matter, so the search looks for one backtick
//! more than that (`memmem`, vectorised): in source full of `inline code`, single backticks are
//! passed over inside the vector loop instead of costing a search each (a 10 MB Rust file: 145
//! µs instead of 335 µs a pass; text without backticks: 90 µs instead of 105 µs, issue 41). A
//! short text is looked through byte by byte: the vectorised search's first use costs the
//! process its processor check (about 27 µs on a virtual machine), more than a short text takes.

/// Texts shorter than this are looked through byte by byte.
const SHORT_BYTES: usize = 512;

/// The needles for runs up to this long are cut from one constant.
const BACKTICKS: [u8; 64] = [b'`'; 64];

/// The longest run of backticks in `bytes` (0 if it holds none).
pub fn longest_run(bytes: &[u8]) -> usize {
    longest_run_over(bytes, 0)
}

/// The longest run of backticks in `bytes` if it is longer than `known`, else `known`.
fn longest_run_over(bytes: &[u8], known: usize) -> usize {
    if bytes.len() < SHORT_BYTES {
        return longest_run_by_byte(bytes).max(known);
    }
    let mut longest = known;
    let mut at = 0;
    loop {
        let wanted = longest + 1;
        let long_needle;
        let needle = match BACKTICKS.get(..wanted) {
            Some(needle) => needle,
            None => {
                long_needle = vec![b'`'; wanted];
                &long_needle[..]
            }
        };
        let Some(found) = memchr::memmem::find(&bytes[at..], needle) else {
            return longest;
        };
        // The first place with `wanted` backticks starts a run (the byte before it is not one:
        // either `at` follows a run, or a run there would have been found first).
        let start = at + found + wanted;
        let more = bytes[start..].iter().take_while(|&&b| b == b'`').count();
        longest = wanted + more;
        at = start + more;
    }
}

fn longest_run_by_byte(bytes: &[u8]) -> usize {
    let (mut longest, mut run) = (0, 0);
    for &byte in bytes {
        run = if byte == b'`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    longest
}

/// The longest run of backticks in a text given in pieces, a run that spans pieces counted
/// whole; also the runs at the text's two ends, so that two parts read apart can be joined.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BacktickRuns {
    /// The longest run so far.
    longest: usize,
    /// The run that begins the text (all of it, while the text is nothing but backticks).
    leading: usize,
    /// The run that ends the text so far.
    trailing: usize,
    /// Whether something other than a backtick has been fed.
    past_leading: bool,
}

impl BacktickRuns {
    /// Takes the next piece of the text.
    pub fn feed(&mut self, piece: &[u8]) {
        let head = piece.iter().take_while(|&&b| b == b'`').count();
        if !self.past_leading {
            self.leading += head;
            self.past_leading = head < piece.len();
        }
        if head == piece.len() {
            self.trailing += head;
            self.longest = self.longest.max(self.trailing);
            return;
        }
        let tail = piece.iter().rev().take_while(|&&b| b == b'`').count();
        // Between the two ends every run starts and ends inside the piece.
        let inner = &piece[head..piece.len() - tail];
        self.longest = longest_run_over(inner, self.longest.max(self.trailing + head).max(tail));
        self.trailing = tail;
    }

    /// The runs of this text followed by `next`'s: two parts of one text, read apart.
    pub fn followed_by(self, next: BacktickRuns) -> BacktickRuns {
        BacktickRuns {
            longest: self
                .longest
                .max(next.longest)
                .max(self.trailing + next.leading),
            leading: if self.past_leading {
                self.leading
            } else {
                self.leading + next.leading
            },
            trailing: if next.past_leading {
                next.trailing
            } else {
                self.trailing + next.trailing
            },
            past_leading: self.past_leading || next.past_leading,
        }
    }

    /// The longest run in the text so far.
    pub fn longest(&self) -> usize {
        self.longest
    }

    /// The run that begins the text.
    pub fn leading(&self) -> usize {
        self.leading
    }

    /// The run that ends the text so far.
    pub fn trailing(&self) -> usize {
        self.trailing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs_of(pieces: &[&[u8]]) -> BacktickRuns {
        let mut runs = BacktickRuns::default();
        for piece in pieces {
            runs.feed(piece);
        }
        runs
    }

    #[test]
    fn the_longest_run_is_found_in_short_and_long_text() {
        assert_eq!(longest_run(b""), 0);
        assert_eq!(longest_run(b"no ticks"), 0);
        assert_eq!(longest_run(b"a `b` c ``d`` ````"), 4);
        let mut long = "x `y` ".repeat(200);
        assert_eq!(longest_run(long.as_bytes()), 1);
        long.push_str("```rust\n");
        long.push_str(&"z".repeat(1000));
        assert_eq!(longest_run(long.as_bytes()), 3);
        long.insert_str(1, "`````");
        assert_eq!(longest_run(long.as_bytes()), 5);
        let ticks = "`".repeat(100);
        assert_eq!(
            longest_run(format!("{}a{ticks}b", "c".repeat(600)).as_bytes()),
            100
        );
        assert_eq!(longest_run(ticks.as_bytes()), 100);
    }

    #[test]
    fn a_run_across_pieces_is_counted_whole() {
        let runs = runs_of(&[b"ab``", b"`", b"``cd"]);
        assert_eq!((runs.longest(), runs.leading(), runs.trailing()), (5, 0, 0));
        let runs = runs_of(&[b"``", b"``", b"x`"]);
        assert_eq!((runs.longest(), runs.leading(), runs.trailing()), (4, 4, 1));
        let runs = runs_of(&[b"``", b"", b"`"]);
        assert_eq!((runs.longest(), runs.leading(), runs.trailing()), (3, 3, 3));
    }

    /// `text` cut at `cuts` (taken in order, past its end meaning its end).
    fn pieces(text: &[u8], cuts: Vec<usize>) -> Vec<&[u8]> {
        let mut cuts: Vec<usize> = cuts.into_iter().map(|cut| cut.min(text.len())).collect();
        cuts.sort_unstable();
        cuts.push(text.len());
        let mut from = 0;
        cuts.into_iter()
            .map(|cut| {
                let piece = &text[from..cut];
                from = cut;
                piece
            })
            .collect()
    }

    proptest::proptest! {
        #[test]
        fn pieces_agree_with_the_whole(
            text in proptest::collection::vec(proptest::sample::select(vec![b'`', b'a', b'\n']), 0..2000),
            cuts in proptest::collection::vec(0usize..2000, 0..6),
        ) {
            let mut runs = BacktickRuns::default();
            for piece in pieces(&text, cuts) {
                runs.feed(piece);
            }
            proptest::prop_assert_eq!(runs.longest(), longest_run_by_byte(&text));
            proptest::prop_assert_eq!(longest_run(&text), longest_run_by_byte(&text));
            let leading = text.iter().take_while(|&&b| b == b'`').count();
            let trailing = text.iter().rev().take_while(|&&b| b == b'`').count();
            proptest::prop_assert_eq!(runs.leading(), leading);
            proptest::prop_assert_eq!(runs.trailing(), trailing);
        }

        #[test]
        fn parts_read_apart_join_as_the_whole(
            text in proptest::collection::vec(proptest::sample::select(vec![b'`', b'a']), 0..300),
            cuts in proptest::collection::vec(0usize..300, 0..6),
        ) {
            let joined = pieces(&text, cuts)
                .into_iter()
                .fold(BacktickRuns::default(), |joined, piece| joined.followed_by(runs_of(&[piece])));
            proptest::prop_assert_eq!(joined, runs_of(&[&text]));
        }
    }
}
