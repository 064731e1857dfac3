//! What can go wrong with an object, and how `object_store`'s errors map onto it.

use crate::ObjectsConfig;

/// Why an object operation failed. Every message names what it is about and what to do.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    /// The bucket name breaks S3's naming rules.
    #[error("bucket name `{bucket}` is not valid: {why}")]
    InvalidBucket {
        /// The name given.
        bucket: String,
        /// Which rule it breaks.
        why: &'static str,
    },
    /// The key cannot name an object.
    #[error("object key `{key}` is not valid: {why}")]
    InvalidKey {
        /// The key given (its first 100 characters).
        key: String,
        /// Which rule it breaks.
        why: &'static str,
    },
    /// The bucket does not exist.
    #[error("bucket `{bucket}` does not exist; {fix}")]
    NoSuchBucket {
        /// The bucket.
        bucket: String,
        /// How to create it.
        fix: String,
    },
    /// The bucket exists but holds no object under the key.
    #[error("no object `{key}` in bucket `{bucket}`")]
    NoSuchKey {
        /// The bucket.
        bucket: String,
        /// The key.
        key: String,
    },
    /// The object is larger than the caller may read.
    #[error(
        "object `{key}` in bucket `{bucket}` is {size} bytes, more than the {limit} bytes allowed"
    )]
    TooLarge {
        /// The bucket.
        bucket: String,
        /// The key.
        key: String,
        /// The object's size.
        size: u64,
        /// The most the caller may read.
        limit: u64,
    },
    /// The S3 server could not be reached.
    #[error(
        "cannot reach the S3 server at {endpoint}: {reason} (is it running, and is the endpoint right?)"
    )]
    Unreachable {
        /// The endpoint URL.
        endpoint: String,
        /// What failed.
        reason: String,
    },
    /// The S3 server refused the credentials or the request.
    #[error(
        "the S3 server at {endpoint} refused access to bucket `{bucket}`: {reason} (check the access key and secret)"
    )]
    Denied {
        /// The endpoint URL.
        endpoint: String,
        /// The bucket.
        bucket: String,
        /// What the server said.
        reason: String,
    },
    /// The object storage is configured wrongly.
    #[error("object storage: {0}")]
    Config(String),
    /// Any other failure of the backend, with its own description.
    #[error("object storage failed on bucket `{bucket}`{}: {reason}", key.as_ref().map(|k| format!(", key `{k}`")).unwrap_or_default())]
    Backend {
        /// The bucket.
        bucket: String,
        /// The key, if the operation had one.
        key: Option<String>,
        /// What the backend reported.
        reason: String,
    },
}

/// The text of `e` and every error under it, for classifying what `object_store` reports only as
/// text (S3 error codes, connection failures).
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// What went wrong at the bottom of `e`, without the layers above repeating it: the connection
/// error, or the HTTP status with the S3 error code instead of the whole XML body.
fn reason(e: &(dyn std::error::Error + 'static)) -> String {
    let mut deepest = e;
    while let Some(s) = deepest.source() {
        deepest = s;
    }
    let text = deepest.to_string();
    let code = text
        .split_once("<Code>")
        .and_then(|(_, rest)| rest.split_once("</Code>"))
        .map(|(code, _)| code);
    match (text.split_once(": <?xml"), code) {
        (Some((status, _)), Some(code)) => format!("{status} ({code})"),
        _ => text,
    }
}

/// Maps an `object_store` error on `bucket` (and `key`) to what the caller should hear.
pub(crate) fn explain(
    e: object_store::Error,
    bucket: &str,
    key: Option<&str>,
    config: &ObjectsConfig,
) -> ObjectError {
    let text = chain(&e);
    let endpoint = match config {
        ObjectsConfig::S3(endpoint) => endpoint.url.clone(),
        ObjectsConfig::Directory(dir) => dir.display().to_string(),
    };
    let is_s3 = matches!(config, ObjectsConfig::S3(_));
    if is_s3 && text.contains("NoSuchBucket") {
        return ObjectError::NoSuchBucket {
            bucket: bucket.to_owned(),
            fix: format!("create it on the S3 server at {endpoint}"),
        };
    }
    match e {
        object_store::Error::NotFound { .. } if let Some(key) = key => ObjectError::NoSuchKey {
            bucket: bucket.to_owned(),
            key: key.to_owned(),
        },
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => ObjectError::Denied {
            endpoint,
            bucket: bucket.to_owned(),
            reason: reason(&e),
        },
        _ if is_s3
            && [
                "InvalidAccessKeyId",
                "SignatureDoesNotMatch",
                "AccessDenied",
            ]
            .iter()
            .any(|code| text.contains(code)) =>
        {
            ObjectError::Denied {
                endpoint,
                bucket: bucket.to_owned(),
                reason: reason(&e),
            }
        }
        _ if is_s3 && (text.contains("error sending request") || text.contains("connect")) => {
            ObjectError::Unreachable {
                endpoint,
                reason: reason(&e),
            }
        }
        _ => ObjectError::Backend {
            bucket: bucket.to_owned(),
            key: key.map(str::to_owned),
            reason: reason(&e),
        },
    }
}
