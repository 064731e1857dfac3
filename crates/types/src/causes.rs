//! [`with_causes`]: an error and the errors under it on one line, for messages that must say
//! what went wrong at the bottom (hyper's "client error (Connect)" says little alone).

/// `error` and its causes, one after the other; a cause whose text its error already quotes is
/// left out.
pub fn with_causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let line = cause.to_string();
        if !text.contains(&line) {
            text.push_str(": ");
            text.push_str(&line);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    enum Layer {
        #[error("client error (Connect)")]
        Outer(#[source] Box<Layer>),
        #[error("tcp connect error: {0}")]
        Quoting(#[source] std::io::Error),
    }

    #[test]
    fn causes_follow_their_error_and_a_quoted_one_is_not_repeated() {
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let error = Layer::Outer(Box::new(Layer::Quoting(refused)));
        assert_eq!(
            with_causes(&error),
            "client error (Connect): tcp connect error: refused"
        );
    }
}
