//! A small Jinja-like template engine, enough for the page `dynamic-html` renders:
//! `{{ a.b }}` prints a value HTML-escaped, `{% for x in a.list %}…{% endfor %}` repeats a block
//! per element, `{% if a.flag %}…{% else %}…{% endif %}` chooses one. As in Jinja, a missing value
//! prints as nothing.

use std::fmt::Write as _;

/// The data a template is rendered with.
#[derive(Debug, Clone)]
pub enum Value {
    Str(String),
    Int(i64),
    Bool(bool),
    List(Vec<Value>),
    Map(Vec<(&'static str, Value)>),
}

impl Value {
    /// A map from its fields; a few fields, so a list beats a hash map.
    pub fn map<const N: usize>(fields: [(&'static str, Value); N]) -> Self {
        Value::Map(fields.into())
    }

    fn field(&self, name: &str) -> Option<&Value> {
        match self {
            Value::Map(fields) => fields.iter().find(|(k, _)| *k == name).map(|(_, v)| v),
            _ => None,
        }
    }

    fn is_truthy(&self) -> bool {
        match self {
            Value::Str(s) => !s.is_empty(),
            Value::Int(i) => *i != 0,
            Value::Bool(b) => *b,
            Value::List(l) => !l.is_empty(),
            Value::Map(m) => !m.is_empty(),
        }
    }
}

/// A parsed template, borrowing its text.
#[derive(Debug)]
pub struct Template<'t> {
    nodes: Vec<Node<'t>>,
}

#[derive(Debug)]
enum Node<'t> {
    Text(&'t str),
    Print(Path<'t>),
    For {
        name: &'t str,
        list: Path<'t>,
        body: Vec<Node<'t>>,
    },
    If {
        condition: Path<'t>,
        then: Vec<Node<'t>>,
        otherwise: Vec<Node<'t>>,
    },
}

/// A dotted name such as `item.tags`.
type Path<'t> = Vec<&'t str>;

impl<'t> Template<'t> {
    /// Parses `source`, or says what is wrong with it.
    pub fn parse(source: &'t str) -> Result<Self, String> {
        let mut parser = Parser { rest: source };
        match parser.block()? {
            (nodes, None) => Ok(Self { nodes }),
            (_, Some(tag)) => Err(format!("unexpected {{% {tag} %}}")),
        }
    }

    /// Renders the template with `context` as its top-level names.
    pub fn render(&self, context: &Value) -> String {
        let mut out = String::with_capacity(1 << 16);
        let mut scope = Vec::new();
        render(&self.nodes, context, &mut scope, &mut out);
        out
    }
}

struct Parser<'t> {
    rest: &'t str,
}

impl<'t> Parser<'t> {
    /// Parses nodes up to the end of the text or to a closing tag (`endfor`, `else`, `endif`),
    /// which it returns for the caller to check.
    fn block(&mut self) -> Result<(Vec<Node<'t>>, Option<&'t str>), String> {
        let mut nodes = Vec::new();
        loop {
            let Some(start) = self.rest.find('{') else {
                if !self.rest.is_empty() {
                    nodes.push(Node::Text(self.rest));
                    self.rest = "";
                }
                return Ok((nodes, None));
            };
            let (open, close) = match self.rest.as_bytes().get(start + 1) {
                Some(b'{') => ("{{", "}}"),
                Some(b'%') => ("{%", "%}"),
                _ => {
                    // A lone brace is text; keep it with what follows.
                    let next = self.rest[start + 1..]
                        .find('{')
                        .map_or(self.rest.len(), |i| start + 1 + i);
                    nodes.push(Node::Text(&self.rest[..next]));
                    self.rest = &self.rest[next..];
                    continue;
                }
            };
            if start > 0 {
                nodes.push(Node::Text(&self.rest[..start]));
            }
            let inner_start = start + open.len();
            let len = self.rest[inner_start..]
                .find(close)
                .ok_or_else(|| format!("{open} without {close}"))?;
            let inner = self.rest[inner_start..inner_start + len].trim();
            self.rest = &self.rest[inner_start + len + close.len()..];
            if open == "{{" {
                nodes.push(Node::Print(path(inner)?));
                continue;
            }
            let words: Vec<&str> = inner.split_whitespace().collect();
            match words.as_slice() {
                ["for", name, "in", list] => {
                    let (body, end) = self.block()?;
                    expect_end(end, "endfor")?;
                    nodes.push(Node::For {
                        name,
                        list: path(list)?,
                        body,
                    });
                }
                ["if", condition] => {
                    let (then, end) = self.block()?;
                    let otherwise = if end == Some("else") {
                        let (otherwise, end) = self.block()?;
                        expect_end(end, "endif")?;
                        otherwise
                    } else {
                        expect_end(end, "endif")?;
                        Vec::new()
                    };
                    nodes.push(Node::If {
                        condition: path(condition)?,
                        then,
                        otherwise,
                    });
                }
                [end @ ("endfor" | "endif" | "else")] => return Ok((nodes, Some(end))),
                _ => return Err(format!("unknown tag {{% {inner} %}}")),
            }
        }
    }
}

fn path(text: &str) -> Result<Path<'_>, String> {
    let path: Path<'_> = text.split('.').collect();
    if path
        .iter()
        .all(|p| !p.is_empty() && p.chars().all(|c| c.is_alphanumeric() || c == '_'))
    {
        Ok(path)
    } else {
        Err(format!("not a name: {text:?}"))
    }
}

fn expect_end(end: Option<&str>, expected: &str) -> Result<(), String> {
    match end {
        Some(end) if end == expected => Ok(()),
        Some(end) => Err(format!("expected {{% {expected} %}}, found {{% {end} %}}")),
        None => Err(format!("missing {{% {expected} %}}")),
    }
}

/// Renders `nodes`; `scope` holds the loop variables, innermost last, which shadow `context`.
fn render<'t, 'v>(
    nodes: &[Node<'t>],
    context: &'v Value,
    scope: &mut Vec<(&'t str, &'v Value)>,
    out: &mut String,
) {
    for node in nodes {
        match node {
            Node::Text(text) => out.push_str(text),
            Node::Print(path) => match lookup(path, context, scope) {
                Some(Value::Str(s)) => escape_into(s, out),
                Some(Value::Int(i)) => {
                    let _ = write!(out, "{i}");
                }
                Some(Value::Bool(b)) => out.push_str(if *b { "True" } else { "False" }),
                // Jinja would print a list or map as its Python repr; the page never does.
                Some(other) => escape_into(&format!("{other:?}"), out),
                None => {}
            },
            Node::For { name, list, body } => {
                if let Some(Value::List(elements)) = lookup(list, context, scope) {
                    for element in elements {
                        scope.push((name, element));
                        render(body, context, scope, out);
                        scope.pop();
                    }
                }
            }
            Node::If {
                condition,
                then,
                otherwise,
            } => {
                let chosen = if lookup(condition, context, scope).is_some_and(Value::is_truthy) {
                    then
                } else {
                    otherwise
                };
                render(chosen, context, scope, out);
            }
        }
    }
}

/// Resolves a dotted name: its first part in the innermost loop that binds it, else in `context`.
fn lookup<'v>(path: &[&str], context: &'v Value, scope: &[(&str, &'v Value)]) -> Option<&'v Value> {
    let (first, rest) = path.split_first()?;
    let root = match scope.iter().rev().find(|(name, _)| name == first) {
        Some((_, value)) => value,
        None => context.field(first)?,
    };
    rest.iter().try_fold(root, |value, part| value.field(part))
}

/// Appends `text` with the characters that are markup in HTML replaced by entities, the same five
/// (and the same entities) as Jinja's autoescape (MarkupSafe).
fn escape_into(text: &str, out: &mut String) {
    let mut clean = 0;
    for (i, b) in text.bytes().enumerate() {
        let entity = match b {
            b'&' => "&amp;",
            b'<' => "&lt;",
            b'>' => "&gt;",
            b'"' => "&#34;",
            b'\'' => "&#39;",
            _ => continue,
        };
        out.push_str(&text[clean..i]);
        out.push_str(entity);
        clean = i + 1;
    }
    out.push_str(&text[clean..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(source: &str, context: &Value) -> String {
        Template::parse(source).unwrap().render(context)
    }

    #[test]
    fn prints_loops_and_branches() {
        let context = Value::map([
            ("title", Value::Str("a < b & \"c\"".into())),
            ("n", Value::Int(-3)),
            (
                "rows",
                Value::List(vec![
                    Value::map([("x", Value::Int(1)), ("on", Value::Bool(true))]),
                    Value::map([("x", Value::Int(2)), ("on", Value::Bool(false))]),
                ]),
            ),
        ]);
        assert_eq!(
            render("<h1>{{ title }}</h1>{{n}}{{ missing.x }}", &context),
            "<h1>a &lt; b &amp; &#34;c&#34;</h1>-3"
        );
        assert_eq!(
            render(
                "{% for r in rows %}[{{ r.x }}:{% if r.on %}on{% else %}off{% endif %}]{% endfor %}",
                &context
            ),
            "[1:on][2:off]"
        );
        assert_eq!(render("a { b } {{n}} {", &context), "a { b } -3 {");
    }

    #[test]
    fn rejects_malformed_templates() {
        for bad in [
            "{{ x",
            "{% for x in y %}",
            "{% endfor %}",
            "{% if x %}{% endfor %}",
            "{% while x %}",
            "{{ a..b }}",
        ] {
            assert!(Template::parse(bad).is_err(), "{bad}");
        }
    }
}
