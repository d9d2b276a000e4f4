//! Where each JSON text ends in the byte stream of a connection. OVSDB sends objects back to
//! back with no delimiter; a large one (the first reply of a monitor carries whole tables)
//! arrives over many reads. The framer scans each byte once, keeping its state between reads
//! (nesting depth, inside a string, after a backslash), so a message of n bytes costs O(n)
//! however it is split — instead of parsing it again from its start after every read.

/// The scanning state of one connection.
#[derive(Debug, Default)]
pub(crate) struct Framer {
    /// How far `buf` has been scanned.
    scanned: usize,
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// Where the message being scanned starts (after whitespace between messages).
    started: bool,
}

/// A byte the framer cannot accept: the stream is not a sequence of JSON objects.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct NotJson(pub u8);

impl Framer {
    /// Scans what `buf` gained since the last call and returns the end offset (exclusive) of
    /// every message completed; after handing those messages out, the caller removes the
    /// bytes up to the last end and calls [`Framer::consumed`] with that count.
    pub(crate) fn scan(&mut self, buf: &[u8]) -> Result<Vec<usize>, NotJson> {
        let mut ends = Vec::new();
        for (i, &b) in buf.iter().enumerate().skip(self.scanned) {
            if !self.started {
                match b {
                    b' ' | b'\t' | b'\r' | b'\n' => continue,
                    b'{' | b'[' => {
                        self.started = true;
                        self.depth = 1;
                        continue;
                    }
                    other => return Err(NotJson(other)),
                }
            }
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        self.started = false;
                        ends.push(i + 1);
                    }
                }
                _ => {}
            }
        }
        self.scanned = buf.len();
        Ok(ends)
    }

    /// The caller removed the first `n` bytes of the buffer.
    pub(crate) fn consumed(&mut self, n: usize) {
        self.scanned -= n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `text` in pieces of `step` bytes; returns the messages found.
    fn split(text: &str, step: usize) -> Vec<String> {
        let mut f = Framer::default();
        let mut buf: Vec<u8> = Vec::new();
        let mut out = Vec::new();
        for chunk in text.as_bytes().chunks(step) {
            buf.extend_from_slice(chunk);
            let ends = f.scan(&buf).unwrap();
            let mut start = 0;
            for end in &ends {
                out.push(
                    String::from_utf8_lossy(&buf[start..*end])
                        .trim()
                        .to_string(),
                );
                start = *end;
            }
            buf.drain(..start);
            f.consumed(start);
        }
        out
    }

    #[test]
    fn finds_every_message_however_the_stream_is_cut() {
        let text = r#"{"id":1,"result":["a}]","\"{"]}  {"method":"update","params":[{"x":[1,[2]]}]}
[1]"#;
        for step in [1, 2, 3, 7, 64, 1000] {
            let msgs = split(text, step);
            assert_eq!(msgs.len(), 3, "step {step}: {msgs:?}");
            for m in &msgs {
                serde_json::from_str::<serde_json::Value>(m).unwrap();
            }
            assert_eq!(msgs[0], r#"{"id":1,"result":["a}]","\"{"]}"#);
        }
    }

    #[test]
    fn a_stream_that_is_not_objects_is_refused() {
        let mut f = Framer::default();
        assert_eq!(f.scan(b"  x"), Err(NotJson(b'x')));
    }
}
