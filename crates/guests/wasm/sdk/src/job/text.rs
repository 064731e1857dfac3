//! [`Text`]: a piece of a partition's input text, shared rather than copied, so that the lines
//! of [`super::Job::lines`] and the words split from them cost no allocation each; short pieces
//! are held in place. With a `String` a line and a word, `wordcount` took 1.30 times as long as
//! the same job written by hand with borrowed `&str`s (64 MiB of text, medians of six runs);
//! with shared pieces, 1.12; with short ones held in place, `wordcount` takes 0.89 of the
//! shared pieces' time on 256 MiB (medians of three alternated runs, 6.40 s against 7.19 s) and
//! 0.70 natively (median of three alternated ratios).

use serde::de::{Deserialize, Deserializer};
use serde::ser::{Serialize, Serializer};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::{Deref, Range};
use std::rc::Rc;

/// A piece of text that shares its bytes with the text it was cut from: cloning it, or cutting
/// it into lines or words, copies nothing but short pieces. It is a `str` (`Deref`), compares
/// and prints as one, and travels between tasks as one. It hashes as itself, not as a `str`
/// (a short piece's fixed-size bytes at once, without the branches on its length that
/// hashing a `str` takes: 4% of a word count's time in WebAssembly), so a map keyed by `Text`
/// is looked up with a `Text`: `map.get(&Text::from("word"))`.
///
/// A piece that fits in the space a shared one takes (18 bytes in WebAssembly: nearly every
/// word) is held in place instead: making one copies its few bytes rather than counting a
/// reference, and comparing two (as a combiner's map does for every word) reads no memory
/// beyond the pieces themselves. Where keys were shared pieces, a third of the word count's
/// time went to comparisons that fetched a far-away key's bytes from memory.
#[derive(Clone)]
pub struct Text(Repr);

/// The longest piece held in place: as many bytes as fit beside the length in the space a
/// shared piece takes (a reference and a range).
pub(crate) const INLINE: usize = 5 * size_of::<usize>() - 2;

#[derive(Clone)]
enum Repr {
    /// `bytes[..len]`; the rest are zeros, so that two pieces compare as arrays.
    Inline { len: u8, bytes: [u8; INLINE] },
    /// `all[range]`, longer than [`INLINE`]: every piece is held in place when it fits, so a
    /// shared piece never equals one held in place.
    Shared { all: Rc<str>, range: Range<usize> },
}

impl Text {
    /// The piece `range` of `all`, whose ends are char boundaries.
    #[inline(always)]
    fn piece(all: &Rc<str>, range: Range<usize>) -> Text {
        match range.len() <= INLINE {
            true => Text::held_at(all.as_bytes(), range.start, range.len()),
            false => Text(Repr::Shared {
                all: all.clone(),
                range,
            }),
        }
    }

    /// `text`, at most [`INLINE`] bytes, held in place.
    #[inline(always)]
    fn held(text: &str) -> Text {
        Text::held_at(text.as_bytes(), 0, text.len())
    }

    /// `src[start..start + len]`, at most [`INLINE`] bytes and whole chars, held in place.
    /// Copied in steps of a fixed size: in WebAssembly a copy of a varying length is a
    /// `memory.copy`, a call out of the guest's code that cost more than the word it copied.
    #[inline(always)]
    fn held_at(src: &[u8], start: usize, len: usize) -> Text {
        debug_assert!(len <= INLINE && start + len <= src.len());
        let mut bytes = [0; INLINE];
        match src.get(start..start + INLINE) {
            // All `INLINE` bytes from `start`, then those past `len` masked off.
            Some(window) => {
                let (words, rest) = window.as_chunks::<8>();
                let (into_words, into_rest) = bytes.as_chunks_mut::<8>();
                for (k, (word, into)) in words.iter().zip(into_words).enumerate() {
                    let keep = len.saturating_sub(8 * k).min(8) as u32;
                    let mask = u64::MAX.checked_shr(64 - 8 * keep).unwrap_or(0);
                    *into = (u64::from_le_bytes(*word) & mask).to_le_bytes();
                }
                let at = INLINE - rest.len();
                for (k, (byte, into)) in rest.iter().zip(into_rest).enumerate() {
                    *into = if at + k < len { *byte } else { 0 };
                }
            }
            // Near the end of `src`: a byte at a time, a fixed number of times.
            None => {
                for (k, into) in bytes.iter_mut().enumerate() {
                    *into = match k < len {
                        true => src[start + k],
                        false => 0,
                    };
                }
            }
        }
        Text(Repr::Inline {
            len: len as u8,
            bytes,
        })
    }

    /// Its piece `range`, whose ends are char boundaries of it.
    #[inline(always)]
    fn sub(&self, range: Range<usize>) -> Text {
        match &self.0 {
            Repr::Shared { all, range: at } => {
                Text::piece(all, at.start + range.start..at.start + range.end)
            }
            Repr::Inline { bytes, .. } => Text::held_at(bytes, range.start, range.len()),
        }
    }

    /// The piece of this text that `part`, a slice of it (from `str` methods on it), is.
    ///
    /// # Panics
    ///
    /// If `part` is not within this text.
    pub fn cut(&self, part: &str) -> Text {
        let start = (part.as_ptr() as usize).wrapping_sub(self.as_ptr() as usize);
        assert!(
            start <= self.len() && part.len() <= self.len() - start,
            "Text::cut: {part:?} is not a piece of this text"
        );
        self.sub(start..start + part.len())
    }

    /// `bytes` as text, without copying them, if they are UTF-8.
    pub(crate) fn from_utf8(bytes: Rc<[u8]>) -> Result<Text, std::str::Utf8Error> {
        std::str::from_utf8(&bytes)?;
        let len = bytes.len();
        // SAFETY: the bytes are UTF-8 (checked above), and `str` has `[u8]`'s layout.
        let all = unsafe { Rc::from_raw(Rc::into_raw(bytes) as *const str) };
        Ok(Text::piece(&all, 0..len))
    }

    /// Its words, as `str::split_whitespace` has them.
    pub fn words(self) -> Words {
        Words { text: self, at: 0 }
    }

    /// Hands `each` its lines, as `str::lines` has them (without `\n` or `\r\n`).
    pub(crate) fn each_line(&self, mut each: impl FnMut(Text)) {
        let base = self.as_ptr() as usize;
        for line in self.lines() {
            let start = line.as_ptr() as usize - base;
            each(self.sub(start..start + line.len()));
        }
    }
}

/// [`Text::words`]' iterator.
pub struct Words {
    text: Text,
    /// Where the next word may start, in `text`.
    at: usize,
}

impl Iterator for Words {
    type Item = Text;

    #[inline(always)]
    fn next(&mut self) -> Option<Text> {
        let bytes = self.text.as_bytes();
        let start = skip(bytes, self.at, true);
        if start == bytes.len() {
            self.at = start;
            return None;
        }
        let stop = word_end(bytes, start);
        self.at = stop;
        Some(self.text.sub(start..stop))
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

/// `skip(bytes, at, false)`, the end of the word at `at`, eight bytes a step while they are
/// letters: the first byte of 0x20 or less (whitespace, or a control char that is not) or of
/// 0x80 or more (in a multi-byte char) is found in a word at once, and `skip` goes on from
/// there. The word's end is then found without a branch a byte, whose last one, taken at a
/// different place each word, cost a mispredicted jump each.
#[inline(always)]
fn word_end(bytes: &[u8], mut at: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    while let Some(eight) = bytes.get(at..).and_then(|rest| rest.first_chunk::<8>()) {
        let x = u64::from_le_bytes(*eight);
        // The high bit of each byte below 0x21, exact up to the first (a borrow marks only
        // bytes after it), and of each byte of 0x80 or more.
        let stops = (x.wrapping_sub(ONES * 0x21) & !x & HIGHS) | (x & HIGHS);
        if stops != 0 {
            return skip(bytes, at + (stops.trailing_zeros() / 8) as usize, false);
        }
        at += 8;
    }
    skip(bytes, at, false)
}

impl Default for Text {
    fn default() -> Self {
        Text::from("")
    }
}

impl Deref for Text {
    type Target = str;

    #[inline(always)]
    fn deref(&self) -> &str {
        match &self.0 {
            // SAFETY: a piece held in place is a copy of a `str`'s whole chars.
            Repr::Inline { len, bytes } => unsafe {
                std::str::from_utf8_unchecked(bytes.get_unchecked(..*len as usize))
            },
            // SAFETY: every shared piece is made with a range within `all` whose ends are ends
            // of `str` slices of it (its lines, words or `cut` pieces), so char boundaries.
            // Unchecked, as hashing and comparing a key derefs it each time.
            Repr::Shared { all, range } => unsafe { all.get_unchecked(range.clone()) },
        }
    }
}

impl From<&str> for Text {
    fn from(text: &str) -> Self {
        match text.len() <= INLINE {
            true => Text::held(text),
            false => Text::piece(&Rc::from(text), 0..text.len()),
        }
    }
}

impl From<String> for Text {
    fn from(text: String) -> Self {
        // An `Rc<str>` copies a `String`'s bytes anyway.
        Text::from(text.as_str())
    }
}

impl PartialEq for Text {
    #[inline(always)]
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (Repr::Inline { len, bytes }, Repr::Inline { len: l, bytes: b }) => {
                len == l && same(bytes, b)
            }
            (Repr::Shared { .. }, Repr::Shared { .. }) => **self == **other,
            _ => false,
        }
    }
}

impl Eq for Text {}

/// `a == b`, eight bytes a step without a branch, where `==` on arrays calls `memcmp` (a loop
/// of bytes in WebAssembly).
#[inline(always)]
fn same(a: &[u8; INLINE], b: &[u8; INLINE]) -> bool {
    let ((a8, a_rest), (b8, b_rest)) = (a.as_chunks::<8>(), b.as_chunks::<8>());
    let mut diff = 0;
    for (x, y) in a8.iter().zip(b8) {
        diff |= u64::from_ne_bytes(*x) ^ u64::from_ne_bytes(*y);
    }
    for (x, y) in a_rest.iter().zip(b_rest) {
        diff |= u64::from(x ^ y);
    }
    diff == 0
}

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
    /// A piece held in place as its zero-padded bytes and its length, in steps of a fixed
    /// size: equal pieces have equal bytes there, as every piece that fits is held in place. A
    /// shared piece as its `str`.
    #[inline(always)]
    fn hash<H: Hasher>(&self, state: &mut H) {
        match &self.0 {
            Repr::Inline { len, bytes } => {
                let (words, rest) = bytes.as_chunks::<8>();
                for word in words {
                    state.write_u64(u64::from_le_bytes(*word));
                }
                let mut last = u64::from(*len) << 56;
                for (k, byte) in rest.iter().enumerate() {
                    last |= u64::from(*byte) << (8 * k);
                }
                state.write_u64(last);
            }
            Repr::Shared { .. } => (**self).hash(state),
        }
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
        deserializer.deserialize_str(TextVisitor)
    }
}

/// Makes a [`Text`] from a borrowed `str` where the format lends one (postcard does), so a
/// short key received is copied once, into place.
struct TextVisitor;

impl<'de> serde::de::Visitor<'de> for TextVisitor {
    type Value = Text;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Text, E> {
        Ok(Text::from(v))
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Text, E> {
        Ok(Text::from(v))
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

    proptest::proptest! {
        #[test]
        fn words_are_split_whitespace_s_on_any_text(
            s in "[a-z!~\x7f\x00-\x20\u{85}\u{a0}\u{3000}\u{1680}é€😀]{0,40}"
        ) {
            let want: Vec<&str> = s.split_whitespace().collect();
            proptest::prop_assert_eq!(words(&s), want);
        }

        /// A word cut from a text (copied from the text's bytes, or shared) equals and hashes
        /// as the same word made on its own, whatever bytes follow it in the text.
        #[test]
        fn a_word_cut_from_text_equals_and_hashes_as_the_word_alone(
            s in "[a-z \u{3000}é😀]{0,60}"
        ) {
            let hash = |t: &Text| {
                let mut hasher = std::hash::DefaultHasher::new();
                t.hash(&mut hasher);
                hasher.finish()
            };
            for word in Text::from(s.as_str()).words() {
                let alone = Text::from(&*word);
                proptest::prop_assert!(word == alone, "{:?}", word);
                proptest::prop_assert_eq!(hash(&word), hash(&alone), "{:?}", word);
            }
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
        assert_eq!(lines[2].cut(&lines[2][1..3]).to_string(), "hr");
    }

    /// The text it shares bytes with, if it does not hold them in place.
    fn shared(text: &Text) -> Option<&Rc<str>> {
        match &text.0 {
            Repr::Shared { all, .. } => Some(all),
            Repr::Inline { .. } => None,
        }
    }

    #[test]
    fn short_pieces_are_held_in_place_and_long_ones_share_the_text() {
        let long = "x".repeat(INLINE + 1);
        let fits = "y".repeat(INLINE);
        let all = Text::from(format!("{long} {fits}\n{fits}é\n"));
        let mut lines = Vec::new();
        all.each_line(|line| lines.push(line));
        let words: Vec<Text> = lines[0].clone().words().collect();
        assert!(Rc::ptr_eq(
            shared(&words[0]).unwrap(),
            shared(&all).unwrap()
        ));
        assert!(shared(&words[1]).is_none());
        assert_eq!((&*words[0], &*words[1]), (&*long, &*fits));
        // One byte over in place (é is two): shared, and equal to the same text made otherwise.
        assert!(shared(&lines[1]).is_some());
        assert_eq!(lines[1], Text::from(format!("{fits}é")));
        assert_eq!(Text::from(fits.as_str()), words[1]);
        assert_ne!(words[0], words[1]);
        // Pieces of a piece held in place are cut from it and compare by content.
        let cut = words[1].cut(&words[1][2..5]);
        assert_eq!((&*cut, cut.clone()), ("yyy", Text::from("yyy")));
        let of_short: Vec<Text> = Text::from("a b").words().collect();
        assert_eq!(of_short, [Text::from("a"), "b".into()]);
        let mut short_lines = Vec::new();
        Text::from("ab\r\ncd").each_line(|line| short_lines.push(line));
        assert_eq!(short_lines, [Text::from("ab"), "cd".into()]);
        assert!(size_of::<Text>() <= 5 * size_of::<usize>() + size_of::<usize>());
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
