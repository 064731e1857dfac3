//! [`Text`]: a piece of a partition's input text, shared rather than copied, so that the lines
//! of [`super::Job::lines`] and the words split from them cost no allocation each. With a
//! `String` a line and a word, `wordcount` took 1.30 times as long as the same job written by
//! hand with borrowed `&str`s (64 MiB of text, medians of six runs); with `Text`, 1.12.

use serde::de::{Deserialize, Deserializer};
use serde::ser::{Serialize, Serializer};
use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::{Deref, Range};
use std::rc::Rc;

/// A piece of text that shares its bytes with the text it was cut from: cloning it, or cutting
/// it into lines or words, copies nothing. It is a `str` (`Deref`), hashes, compares and prints
/// as one, and travels between tasks as one.
#[derive(Clone)]
pub struct Text {
    all: Rc<str>,
    range: Range<usize>,
}

impl Text {
    /// The piece of this text that `part`, a slice of it (from `str` methods on it), is.
    ///
    /// # Panics
    ///
    /// If `part` is not within this text.
    pub fn cut(&self, part: &str) -> Text {
        let base = self.all.as_ptr() as usize;
        let start = (part.as_ptr() as usize).wrapping_sub(base);
        assert!(
            start >= self.range.start && start + part.len() <= self.range.end,
            "Text::cut: {part:?} is not a piece of this text"
        );
        Text {
            all: self.all.clone(),
            range: start..start + part.len(),
        }
    }

    /// `bytes` as text, without copying them, if they are UTF-8.
    pub(crate) fn from_utf8(bytes: Rc<[u8]>) -> Result<Text, std::str::Utf8Error> {
        std::str::from_utf8(&bytes)?;
        let len = bytes.len();
        // SAFETY: the bytes are UTF-8 (checked above), and `str` has `[u8]`'s layout.
        let all = unsafe { Rc::from_raw(Rc::into_raw(bytes) as *const str) };
        Ok(Text { all, range: 0..len })
    }

    /// Its words, as `str::split_whitespace` has them.
    pub fn words(self) -> Words {
        let at = self.range.start;
        Words { text: self, at }
    }

    /// Hands `each` its lines, as `str::lines` has them (without `\n` or `\r\n`).
    pub(crate) fn each_line(&self, mut each: impl FnMut(Text)) {
        let base = self.all.as_ptr() as usize;
        for line in self.deref().lines() {
            let start = line.as_ptr() as usize - base;
            each(Text {
                all: self.all.clone(),
                range: start..start + line.len(),
            });
        }
    }
}

/// [`Text::words`]' iterator.
pub struct Words {
    text: Text,
    at: usize,
}

impl Iterator for Words {
    type Item = Text;

    #[inline(always)]
    fn next(&mut self) -> Option<Text> {
        let end = self.text.range.end;
        let bytes = &self.text.all.as_bytes()[..end];
        let start = skip(bytes, self.at, true);
        if start == end {
            self.at = end;
            return None;
        }
        let stop = skip(bytes, start, false);
        self.at = stop;
        Some(Text {
            all: self.text.all.clone(),
            range: start..stop,
        })
    }
}

/// The first position from `at` (a char boundary) in `bytes` (a `str`'s) that is not whitespace if
/// `whitespace`, or that is whitespace if not; `bytes.len()` if none. Byte by byte where the
/// text is ASCII, as nearly all of it is, where `str::split_whitespace` decodes every char.
#[inline(always)]
fn skip(bytes: &[u8], mut at: usize, whitespace: bool) -> usize {
    while let Some(&b) = bytes.get(at) {
        let (is_space, len) = if b.is_ascii() {
            // `char::is_whitespace` of ASCII: tab, line feed, vertical tab, form feed,
            // carriage return and space.
            (matches!(b, b'\t'..=b'\r' | b' '), 1)
        } else {
            // SAFETY: `bytes` is a `str`'s, and `at` a char boundary in it: the range's start,
            // or a boundary plus the length of the char there.
            let rest = unsafe { std::str::from_utf8_unchecked(&bytes[at..]) };
            let c = rest.chars().next().expect("at is before the end");
            (c.is_whitespace(), c.len_utf8())
        };
        if is_space != whitespace {
            return at;
        }
        at += len;
    }
    bytes.len()
}

impl Default for Text {
    fn default() -> Self {
        Text::from("")
    }
}

impl Deref for Text {
    type Target = str;

    fn deref(&self) -> &str {
        // SAFETY: every `Text` is made with a range within `all` whose ends are ends of `str`
        // slices of it (its lines, words or `cut` pieces), so char boundaries. Unchecked, as
        // hashing and comparing a word as a key derefs it each time.
        unsafe { self.all.get_unchecked(self.range.clone()) }
    }
}

impl Borrow<str> for Text {
    fn borrow(&self) -> &str {
        self
    }
}

impl From<String> for Text {
    fn from(text: String) -> Self {
        let len = text.len();
        Text {
            all: Rc::from(text),
            range: 0..len,
        }
    }
}

impl From<&str> for Text {
    fn from(text: &str) -> Self {
        Text {
            all: Rc::from(text),
            range: 0..text.len(),
        }
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for Text {}

impl PartialOrd for Text {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Text {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (**self).cmp(&**other)
    }
}

impl Hash for Text {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (**self).hash(state);
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self)
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl Serialize for Text {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self)
    }
}

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Text::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::codec;

    fn words(s: &str) -> Vec<String> {
        Text::from(s).words().map(|w| w.to_string()).collect()
    }

    #[test]
    fn words_are_split_whitespace_s() {
        for s in ["", "  ", "a", " a  bb\tc\u{3000}λ ", "x\n y\r\nz", "é è"] {
            let want: Vec<&str> = s.split_whitespace().collect();
            assert_eq!(words(s), want, "{s:?}");
        }
    }

    #[test]
    fn lines_and_their_words_share_the_text() {
        let all = Text::from("one two\r\n\nthree\n");
        let mut lines = Vec::new();
        all.each_line(|line| lines.push(line));
        assert_eq!(lines, [Text::from("one two"), "".into(), "three".into()]);
        let words: Vec<Text> = lines[0].clone().words().collect();
        assert_eq!(words, [Text::from("one"), "two".into()]);
        assert!(Rc::ptr_eq(&words[1].all, &all.all));
        assert_eq!(lines[2].cut(&lines[2][1..3]).to_string(), "hr");
    }

    #[test]
    #[should_panic(expected = "is not a piece of this text")]
    fn a_cut_outside_the_text_is_refused() {
        let all = Text::from("abc");
        let part = all.cut(&all[1..]);
        part.cut(&all[..1]);
    }

    #[test]
    fn text_travels_as_a_str() {
        let t = Text::from("a b").words().nth(1).unwrap();
        assert_eq!(codec::encode(&t), codec::encode("b"));
        assert_eq!(codec::decode::<Text>(&codec::encode("b")).unwrap(), t);
    }
}
