//! Masking a stream as it is read ([`MaskingReader`]): what fs.search reads of each file.

use std::io::{self, Read};

use super::{Edge, Secrets};

/// A reader that masks secrets in what it reads: what it returns is held back until the bytes
/// after it are read (a margin), so an occurrence cut by a read's end is masked whole. Reads go
/// straight through when there is nothing to mask.
pub struct MaskingReader<'s, R> {
    inner: R,
    secrets: &'s Secrets,
    /// Read, not yet masked and returned.
    raw: Vec<u8>,
    /// The last returned bytes as read (unmasked), up to the margin: the window's left side.
    previous: Vec<u8>,
    /// Masked, ready to return from `at` on.
    out: Vec<u8>,
    at: usize,
    eof: bool,
    /// What the inner reader fills, kept from one refill to the next.
    chunk: Vec<u8>,
}

/// What a [`MaskingReader`] asks of its reader at a time.
const READ_CHUNK: usize = 64 * 1024;

impl<'s, R: Read> MaskingReader<'s, R> {
    /// Masks `secrets` in what `inner` gives.
    pub fn new(inner: R, secrets: &'s Secrets) -> MaskingReader<'s, R> {
        MaskingReader {
            inner,
            secrets,
            raw: Vec::new(),
            previous: Vec::new(),
            out: Vec::new(),
            at: 0,
            eof: false,
            chunk: Vec::new(),
        }
    }

    /// Reads until more than a margin is in hand (or the end), then masks what can be returned.
    fn refill(&mut self) -> io::Result<()> {
        let margin = self.secrets.margin();
        if self.chunk.is_empty() {
            self.chunk = vec![0u8; READ_CHUNK];
        }
        while !self.eof && self.raw.len() <= margin {
            match self.inner.read(&mut self.chunk) {
                Ok(0) => self.eof = true,
                Ok(n) => self.raw.extend_from_slice(&self.chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        let ready = if self.eof {
            self.raw.len()
        } else {
            self.raw.len() - margin
        };
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        out.extend_from_slice(&self.raw[..ready]);
        self.secrets.mask_window(
            &mut out,
            Edge::exact(&self.previous),
            Edge::exact(&self.raw[ready..]),
        );
        self.previous.extend_from_slice(&self.raw[..ready]);
        let keep_from = self.previous.len().saturating_sub(margin);
        self.previous.drain(..keep_from);
        self.raw.drain(..ready);
        self.out = out;
        self.at = 0;
        Ok(())
    }
}

impl<R: Read> Read for MaskingReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.secrets.is_empty() {
            return self.inner.read(buf);
        }
        while self.at == self.out.len() {
            if self.eof && self.raw.is_empty() {
                return Ok(0);
            }
            self.refill()?;
        }
        let n = buf.len().min(self.out.len() - self.at);
        buf[..n].copy_from_slice(&self.out[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-live-0123456789abcdef";

    #[test]
    fn a_masking_reader_masks_across_its_reads_whatever_their_size() {
        let s = Secrets::from_values([KEY.to_owned()]);
        let content = format!("{KEY}{}{KEY}\n{}{KEY}", "x".repeat(70_000), "y".repeat(3));
        let mut expected = content.clone().into_bytes();
        s.mask_bytes(&mut expected);
        for step in [1, 7, 23, 4096, 100_000] {
            struct Trickle<'a>(&'a [u8], usize);
            impl Read for Trickle<'_> {
                fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                    let n = self.1.min(buf.len()).min(self.0.len());
                    buf[..n].copy_from_slice(&self.0[..n]);
                    self.0 = &self.0[n..];
                    Ok(n)
                }
            }
            let mut got = Vec::new();
            MaskingReader::new(Trickle(content.as_bytes(), step), &s)
                .read_to_end(&mut got)
                .unwrap();
            assert_eq!(got, expected, "step {step}");
        }
        assert!(!String::from_utf8_lossy(&expected).contains("sk-"));
    }
}
