//! The commit messages of exported turns: the prompt, a blank line, then one paragraph of
//! `Retrace-*` trailers that say what the commit is (`docs/sharing.md` lists them). Values
//! that are not plain one-line text (paths, labels, names) are written C-quoted, as git
//! quotes paths.

/// The trailer every commit retrace writes carries, with the version of this layout.
pub const FORMAT_TRAILER: &str = "Retrace-Format";
/// The layout version written today.
pub const FORMAT: &str = "1";

/// A commit message taken apart: the text above the trailers and the trailers in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Message {
    /// The text above the trailer paragraph (the prompt).
    pub text: String,
    /// Trailers, in order, values unquoted.
    pub trailers: Vec<(String, Vec<u8>)>,
}

impl Message {
    /// A message of `text` and no trailers yet.
    #[must_use]
    pub fn new(text: &str) -> Message {
        Message {
            text: text.to_string(),
            trailers: vec![(FORMAT_TRAILER.into(), FORMAT.into())],
        }
    }

    /// Adds a trailer.
    pub fn add(&mut self, key: &str, value: impl AsRef<[u8]>) {
        self.trailers.push((key.to_string(), value.as_ref().to_vec()));
    }

    /// The first value of `key`.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<&[u8]> {
        self.trailers
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_slice())
    }

    /// The first value of `key` as text.
    #[must_use]
    pub fn text_of(&self, key: &str) -> Option<String> {
        self.get(key).map(|v| String::from_utf8_lossy(v).into_owned())
    }

    /// The first value of `key` as a number; `Err` naming the trailer when it is not one.
    ///
    /// # Errors
    /// A value that is not a number.
    pub fn number(&self, key: &str) -> Result<Option<u64>, String> {
        self.get(key)
            .map(|v| {
                std::str::from_utf8(v)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| format!("its {key} trailer is not a number"))
            })
            .transpose()
    }

    /// Every value of `key`.
    pub fn all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.trailers
            .iter()
            .filter(move |(k, _)| k == key)
            .map(|(_, v)| v.as_slice())
    }

    /// The message as git stores it.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = self.text.clone().into_bytes();
        out.extend_from_slice(b"\n\n");
        for (k, v) in &self.trailers {
            out.extend_from_slice(k.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(&quote(v));
            out.push(b'\n');
        }
        out
    }

    /// Takes a commit message apart; `None` when its last paragraph is not retrace's
    /// trailers (a commit retrace did not write).
    #[must_use]
    pub fn decode(message: &[u8]) -> Option<Message> {
        let body = message.strip_suffix(b"\n")?;
        let split = body.windows(2).rposition(|w| w == b"\n\n")?;
        let (text, block) = (&body[..split], &body[split + 2..]);
        let mut trailers = Vec::new();
        for line in block.split(|&b| b == b'\n') {
            let at = line.windows(2).position(|w| w == b": ")?;
            let key = std::str::from_utf8(&line[..at]).ok()?;
            if !key.starts_with("Retrace-") {
                return None;
            }
            trailers.push((key.to_string(), unquote(&line[at + 2..])?));
        }
        let m = Message {
            text: String::from_utf8(text.to_vec()).ok()?,
            trailers,
        };
        (m.get(FORMAT_TRAILER) == Some(FORMAT.as_bytes())).then_some(m)
    }
}

/// Whether `v` must be quoted to stay one unambiguous trailer value.
fn needs_quote(v: &[u8]) -> bool {
    v.first().is_some_and(|&b| b == b'"' || b == b' ')
        || v.last() == Some(&b' ')
        || v.iter().any(|&b| b < 0x20 || b == 0x7f || b == b'\\' || b >= 0x80)
}

/// `v` as written in a trailer: as is, or C-quoted (`"…"`, with `\\`, `\"`, `\n`, `\t` and
/// three-digit octal escapes for every other byte below 0x20 or from 0x7f).
#[must_use]
pub fn quote(v: &[u8]) -> Vec<u8> {
    if !needs_quote(v) {
        return v.to_vec();
    }
    let mut out = vec![b'"'];
    for &b in v {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x20..0x7f => out.push(b),
            _ => out.extend_from_slice(format!("\\{b:03o}").as_bytes()),
        }
    }
    out.push(b'"');
    out
}

/// A trailer value as [`quote`] wrote it; `None` for a malformed quoted value.
#[must_use]
pub fn unquote(v: &[u8]) -> Option<Vec<u8>> {
    let Some(inner) = v.strip_prefix(b"\"") else {
        return Some(v.to_vec());
    };
    let inner = inner.strip_suffix(b"\"")?;
    let mut out = Vec::with_capacity(inner.len());
    let mut i = 0;
    while i < inner.len() {
        let b = inner[i];
        i += 1;
        if b != b'\\' {
            out.push(b);
            continue;
        }
        let e = *inner.get(i)?;
        i += 1;
        match e {
            b'"' | b'\\' => out.push(e),
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'0'..=b'3' => {
                let digits = inner.get(i - 1..i + 2)?;
                let mut n = 0u8;
                for &d in digits {
                    if !(b'0'..=b'7').contains(&d) {
                        return None;
                    }
                    n = n.checked_mul(8)?.checked_add(d - b'0')?;
                }
                out.push(n);
                i += 2;
            }
            _ => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_round_trips_with_awkward_prompts_and_values() {
        for prompt in ["fix it", "", "two\n\nparagraphs\n\nRetrace-Format: 1", "ends\n", " sp "] {
            let mut m = Message::new(prompt);
            m.add("Retrace-Turn", "3");
            m.add("Retrace-Empty-Dir", b"a dir/with \"quotes\"\n\\and\xff bytes".as_slice());
            m.add("Retrace-Label", " leading space");
            let back = Message::decode(&m.encode()).expect("decodes");
            assert_eq!(back, m, "{prompt:?}");
        }
    }

    #[test]
    fn a_message_without_retrace_trailers_is_not_one() {
        assert_eq!(Message::decode(b"just a commit\n"), None);
        assert_eq!(Message::decode(b"subject\n\nSigned-off-by: x <y>\n"), None);
        assert_eq!(Message::decode(b"subject\n\nRetrace-Format: 2\n"), None);
        assert_eq!(Message::decode(b"subject\n\nRetrace-Format: 1\nOther: x\n"), None);
        assert!(Message::decode(b"subject\n\nRetrace-Format: 1\n").is_some());
    }

    #[test]
    fn malformed_quoting_is_refused() {
        for bad in [&b"\"open"[..], b"\"bad \\q\"", b"\"\\9\"", b"\"\\47\""] {
            assert_eq!(unquote(bad), None, "{bad:?}");
        }
        assert_eq!(unquote(b"\"\\377\""), Some(vec![0xff]));
    }
}
