//! Where objects are kept: an S3-compatible server or a local directory.

use std::path::PathBuf;

/// An S3-compatible server and the credentials to use with it.
#[derive(Clone, Debug)]
pub struct S3Endpoint {
    /// The server's URL, such as `http://127.0.0.1:9000`; buckets are addressed by path.
    pub url: String,
    /// The region requests are signed for (`us-east-1` for most self-hosted servers).
    pub region: String,
    /// The access key id.
    pub access_key: String,
    /// The secret access key.
    pub secret_key: String,
}

/// Where objects are kept.
#[derive(Clone, Debug)]
pub enum ObjectsConfig {
    /// In an S3-compatible server.
    S3(S3Endpoint),
    /// In a local directory: bucket `b` is the subdirectory `b`, key `k/x` the file `b/k/x`.
    Directory(PathBuf),
}
