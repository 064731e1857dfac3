//! `dynamic-html`: renders a shop's catalogue page for a user from an HTML template, modelling
//! SeBS's 110.dynamic-html (a Jinja2 template with a loop over a generated list). The template is
//! parsed on every call, as `jinja2.Template(...)` does, and rendered by a small interpreter
//! ([`template`]) with a Jinja-like syntax.
//!
//! Request: `seed=42 size=3500` (items on the page). Answer: `items=… bytes=… fnv1a=…`, the page's
//! length and FNV-1a hash, so a test can tell that the whole page was rendered and escaped.

mod template;

use suite_input::{Params, Rng};
use template::Value;

const TEMPLATE: &str = include_str!("page.html");
const DEFAULT_ITEMS: u64 = 3_500;
const MAX_ITEMS: u64 = 1_000_000;

fn dynamic_html(body: &[u8]) -> Vec<u8> {
    let params = Params::parse(body);
    let items = params.u64_in("size", DEFAULT_ITEMS, 0, MAX_ITEMS) as usize;
    let context = catalogue(items, &mut Rng::new(params.seed()));
    let page = template::Template::parse(TEMPLATE)
        .expect("the built-in template is valid")
        .render(&context);
    format!(
        "seed={} items={items} bytes={} fnv1a={:016x}\n",
        params.seed(),
        page.len(),
        fnv1a(page.as_bytes())
    )
    .into_bytes()
}

/// The page's data: a user, a shop and `items` products with made-up names, prices and tags. The
/// descriptions contain `<`, `&` and quotes, so the escaping does real work.
fn catalogue(items: usize, rng: &mut Rng) -> Value {
    let user = word(rng, 2);
    let list = (0..items)
        .map(|id| {
            let name = format!("{} {}", capitalised(&word(rng, 2)), word(rng, 3));
            let tags = (0..1 + rng.below(4))
                .map(|_| Value::Str(word(rng, 2)))
                .collect();
            Value::map([
                ("id", Value::Int(id as i64 + 1)),
                ("name", Value::Str(name)),
                ("description", Value::Str(sentence(rng))),
                ("price", Value::Str(price(rng))),
                ("tags", Value::List(tags)),
                ("in_stock", Value::Bool(rng.below(5) != 0)),
            ])
        })
        .collect();
    Value::map([
        (
            "user",
            Value::map([
                ("name", Value::Str(capitalised(&user))),
                ("email", Value::Str(format!("<{user}@example.com>"))),
            ]),
        ),
        (
            "shop",
            Value::map([
                ("name", Value::Str("Tom & Jerry's \"Emporium\"".to_owned())),
                ("count", Value::Int(items as i64)),
            ]),
        ),
        ("items", Value::List(list)),
    ])
}

const SYLLABLES: [&str; 24] = [
    "ka", "lo", "mi", "ne", "ru", "sa", "te", "vo", "zi", "ba", "do", "fu", "ga", "hi", "ja", "ko",
    "la", "me", "no", "pi", "qua", "ri", "so", "tu",
];

/// A pronounceable made-up word of 1 to `max_syllables + 1` syllables.
fn word(rng: &mut Rng, max_syllables: u64) -> String {
    (0..1 + rng.below(max_syllables + 1))
        .map(|_| SYLLABLES[rng.below(SYLLABLES.len() as u64) as usize])
        .collect()
}

fn capitalised(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

/// Eight to twenty words, some of them markup-significant, as user-written text often is.
fn sentence(rng: &mut Rng) -> String {
    const SPECIAL: [&str; 5] = ["<b>new</b>", "&", "\"best\"", "size<10", "it's"];
    let words = 8 + rng.below(13);
    let mut text = capitalised(&word(rng, 3));
    for _ in 1..words {
        text.push(' ');
        if rng.below(8) == 0 {
            text.push_str(SPECIAL[rng.below(SPECIAL.len() as u64) as usize]);
        } else {
            text.push_str(&word(rng, 3));
        }
    }
    text.push('.');
    text
}

fn price(rng: &mut Rng) -> String {
    let cents = 99 + rng.below(100_000);
    format!("€{}.{:02}", cents / 100, cents % 100)
}

/// 64-bit FNV-1a: a short, order-sensitive fingerprint of the page for the answer.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

mote_sdk::handler!(dynamic_html);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_item_escaped() {
        let context = catalogue(50, &mut Rng::new(1));
        let page = template::Template::parse(TEMPLATE)
            .unwrap()
            .render(&context);
        assert_eq!(page.matches("<tr id=\"item-").count(), 50);
        assert!(page.contains("<tr id=\"item-50\">"));
        assert!(page.contains("Tom &amp; Jerry&#39;s &#34;Emporium&#34;"));
        assert!(!page.contains("<b>new</b>"), "text is escaped");
        assert!(!page.contains("{{") && !page.contains("{%"));
    }

    #[test]
    fn answer_depends_on_seed_and_size() {
        let default = dynamic_html(b"");
        assert_eq!(default, dynamic_html(b"seed=42 size=3500"));
        assert_ne!(default, dynamic_html(b"seed=43"));
        let small = String::from_utf8(dynamic_html(b"size=10")).unwrap();
        assert!(small.contains("items=10 "), "{small}");
    }
}
